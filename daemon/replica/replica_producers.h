/*
 * daemon/replica/replica_producers.h — what a partition remembers of its idempotent
 * and transactional producers (Kafka's ProducerStateManager): sequences,
 * each producer's open transaction, the partition's first unstable offset.
 *
 * The table (bk_pstate) is plain memory with no knowledge of the broker,
 * so the unit tests drive it alone; bk_producers_* at the bottom tie it
 * to a partition: rebuild at open, snapshot at close and on a timer.
 */
#ifndef SLUICE_PRODUCER_STATE_H
#define SLUICE_PRODUCER_STATE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "protocol/kp.h"

/* Batches remembered per producer (Kafka's NumBatchesToRetain): a client
 * has at most 5 requests in flight per partition, so a retry is always a
 * repeat of one of these. */
#define BK_PRODUCER_BATCHES 5
/* Kafka's producer.id.expiration.ms default: a producer silent for a day
 * is forgotten (its next batch is accepted at any sequence, as Kafka does
 * for a producer whose state is gone). */
#define BK_PRODUCER_EXPIRATION_MS (24LL * 3600 * 1000)

typedef struct bk_pbatch {
    int32_t first_seq, last_seq;
    int64_t base_offset;
    int32_t offset_delta;            /* LastOffsetDelta */
    int64_t timestamp;               /* MaxTimestamp as stored */
} bk_pbatch;

typedef struct bk_producer {
    int64_t pid;
    int64_t last_ts;                 /* ms, for expiry */
    int64_t txn_first;               /* currentTxnFirstOffset; -1: no open txn */
    int32_t coord_epoch;             /* of its last marker; -1: none yet */
    uint32_t open_at;                /* its index in bk_pstate.open while
                                        txn_first >= 0 */
    int64_t last_offset;             /* of its newest data batch (or marker:
                                        replica_producers.c P9); -1 unknown */
    int16_t epoch;
    uint8_t n;                       /* batches[] in use */
    uint8_t head;                    /* index of the newest */
    bk_pbatch batches[BK_PRODUCER_BATCHES];
} bk_producer;

struct seg_log;
typedef struct bk_pstate {
    bk_producer **slots;             /* open addressing by pid, NULL = free */
    uint32_t cap;                    /* power of two, or 0 */
    uint32_t n;
    bool dirty;                      /* changed since the last snapshot */
    uint32_t open_txns;              /* producers with txn_first >= 0 */
    bk_producer **open;              /* those, a min-heap by txn_first of
                                        cap entries (replica_producers.c P4) */
    int64_t first_unstable;          /* smallest txn_first; -1: none (replica_producers.c P4) */
    struct seg_log *log;             /* where ABORTs enter the aborted-
                                        transaction index; NULL: nowhere */
    int64_t snapshot_at;             /* the newest snapshot's offset, a
                                        replay's start (replica_producers.c
                                        P2); -1: none.  The cleaner keeps
                                        markers past it (cleaner.c X3) */
    int64_t local_start;             /* a mirror that left mirroring: its
                                        first local offset; the producers
                                        last seen below it are the source's
                                        (replica_producers.c P9); -1: none */
} bk_pstate;

/* A transaction marker (control record), as the log stores it. */
typedef struct bk_marker {
    bool commit;                     /* COMMIT (1) or ABORT (0) */
    int32_t coordinator_epoch;
} bk_marker;
/* Reads the marker of a whole control batch (header + its one record);
 * 0, or -1 when it is not a transaction marker that can be read. */
int replica_marker_parse(const uint8_t *batch, size_t len, bk_marker *m);
/* Writes the control batch of a marker into out (REPLICA_MARKER_SIZE
 * bytes): BaseOffset 0 (the append assigns it), the producer's id and
 * epoch, BaseSequence -1, one record: key = version 0 + type, value =
 * version 0 + coordinator epoch.  Returns its size. */
#define REPLICA_MARKER_SIZE 78
size_t replica_marker_build(uint8_t *out, int64_t pid, int16_t epoch, int32_t leader_epoch,
                            const bk_marker *m, int64_t now_ms);

void replica_pstate_init(bk_pstate *ps);
void replica_pstate_free(bk_pstate *ps);
bk_producer *replica_pstate_find(const bk_pstate *ps, int64_t pid);

/* Not a Kafka code: "this is a retry of a stored batch". */
#define BK_PS_DUPLICATE (-1)

/* Checks the idempotent batches among `len` bytes of validated batches
 * before they are appended (cost: one hash lookup per batch with a
 * ProducerId; batches without one are skipped).  Returns KP_NONE (append
 * them), BK_PS_DUPLICATE with *dup the stored batch the first one repeats
 * (append nothing, answer with its offset, as Kafka does), or the error
 * for the partition: INVALID_PRODUCER_EPOCH, OUT_OF_ORDER_SEQUENCE_NUMBER,
 * CORRUPT_MESSAGE (negative
 * epoch or sequence with a ProducerId), INVALID_TXN_STATE (a
 * non-transactional batch from a producer with an open transaction). */
int replica_pstate_check(const bk_pstate *ps, const uint8_t *batches, size_t len,
                    bk_pbatch *dup);
/* Records the idempotent batches just appended (BaseOffset assigned).
 * 0, or -1 when memory ran out (that producer's retries are then not
 * recognised: logged by the caller). */
int replica_pstate_record(bk_pstate *ps, const uint8_t *batches, size_t len,
                     int64_t now_ms);
/* Checks a marker the coordinator asks for (Kafka's appendEndTxnMarker):
 * KP_NONE, INVALID_PRODUCER_EPOCH (older than the producer's epoch) or
 * TRANSACTION_COORDINATOR_FENCED (older coordinator epoch). */
int replica_pstate_check_marker(const bk_pstate *ps, int64_t pid, int16_t epoch,
                                int32_t coordinator_epoch);
/* One stored batch header (rebuild from the log); m: its marker when it
 * is a control batch (NULL: a data batch, or a control batch not read). */
int replica_pstate_apply(bk_pstate *ps, const kp_batch *h, int64_t ts, const bk_marker *m);
/* replica_producers.c P9: from offset on the partition's batches are local (a mirror that
 * left mirroring, daemon/link/link.c K17): producers last seen below it
 * are forgotten (none with an open transaction), and the batches below it
 * leave the rings of the others.  offset -1: none.  Returns how many
 * producers were forgotten. */
uint32_t replica_pstate_local_start(bk_pstate *ps, int64_t offset);
/* Forgets producers whose last batch is older than now - max_age.
 * Returns how many. */
uint32_t replica_pstate_expire(bk_pstate *ps, int64_t now_ms, int64_t max_age_ms);

/* Snapshot files "<dir>/<20-digit offset>.snapshot": the state after
 * every batch below offset.  save writes atomically (temp + rename) and
 * keeps the two newest.  load takes the newest valid one at or below
 * log_end into an empty ps, removes those above it (a torn tail was cut),
 * and returns its offset, or -1 when there is none usable. */
int     replica_pstate_save(const bk_pstate *ps, const char *dir, int64_t offset);
int64_t replica_pstate_load(bk_pstate *ps, const char *dir, int64_t log_end);

/* ---- the partition's side (replica.h: bk_partition.producers) ------------ */
struct bk_broker;
struct bk_partition;
/* At open: loads the newest usable snapshot and replays batch headers
 * from its offset to the log end (all of the log without one); writes a
 * fresh snapshot when it replayed anything.  0 or -1 (out of memory, or
 * the log unreadable: logged; the partition then starts with no state). */
int  replica_producers_open(struct bk_broker *b, struct bk_partition *p);
/* At close: a snapshot at the log end unless destroy (topic deletion),
 * then frees. */
void replica_producers_close(struct bk_broker *b, struct bk_partition *p, bool destroy);
/* After the log was cut back (a follower truncating): the state again as
 * the log now has it, from the newest snapshot at or below its end. */
int  replica_producers_reset(struct bk_broker *b, struct bk_partition *p);
/* link.c K17: p's local batches start at offset (kept on p, so a reset
 * or a reopen of the state applies it again after its replay). */
void replica_producers_local_start(struct bk_partition *p, int64_t offset);
/* Maintenance timer: expires silent producers and snapshots partitions
 * whose state changed, so a crash replays little of the log. */
void replica_producers_tick(struct bk_broker *b);

#endif
