/*
 * daemon/txn/txn_int.h — the transaction coordinator's own declarations,
 * shared by the files of daemon/txn/ only.
 */
#ifndef SLUICE_TXN_INT_H
#define SLUICE_TXN_INT_H

#include "daemon/txn/txn.h"

#define TXN_TOPIC "__transaction_state"

/* TransactionStatus, the numbers of Kafka's TransactionLogValue. */
enum txn_status {
    TXN_EMPTY = 0, TXN_ONGOING = 1, TXN_PREPARE_COMMIT = 2, TXN_PREPARE_ABORT = 3,
    TXN_COMPLETE_COMMIT = 4, TXN_COMPLETE_ABORT = 5, TXN_DEAD = 6,
    TXN_PREPARE_EPOCH_FENCE = 7,
};

typedef struct txn_tp {
    char *topic;
    int32_t partition;
} txn_tp;

/* What one TransactionLogValue says: a transactional id's state. */
typedef struct txn_rec {
    int64_t pid, last_pid;
    int16_t epoch, last_epoch;
    int32_t timeout_ms;
    int8_t state;
    txn_tp *tps;                      /* owned */
    size_t ntps;
    int64_t start_ms, update_ms;
} txn_rec;

struct txn_markers;

typedef struct txn_meta {
    struct txn_meta *hnext;
    char *id;
    size_t id_len;
    int32_t part;                     /* its partition of __transaction_state */
    txn_rec cur;                      /* what the log says (txn_log.c T2) */
    bool pending;                     /* a record of it is being written (txn_log.c T3) */
    bool gone;                        /* unloaded while busy: freed when idle (txn_log.c T4) */
    struct txn_markers *markers;      /* markers being written (txn_log.c T3) */
} txn_meta;

/* ---- txn_log.c: __transaction_state, loading, writing ------------------------ */
/* KP_NONE when this broker coordinates id (its partition loaded), else
 * NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS or COORDINATOR_NOT_AVAILABLE;
 * *part set on KP_NONE. */
int16_t txn_log_owner(bk_broker *b, const char *id, size_t len, int32_t *part);
txn_meta *txn_meta_find(const char *id, size_t len);
/* A new id in partition part (state Empty, nothing written yet). */
txn_meta *txn_meta_add(const char *id, size_t len, int32_t part);
void txn_meta_remove(txn_meta *m);
void txn_meta_foreach(void (*fn)(txn_meta *m, void *arg), void *arg);
/* A partition of __transaction_state led here is still loading. */
bool txn_log_loading(void);
/* The coordinator epoch of partition part (its leader epoch), -1 if not led. */
int32_t txn_log_epoch(int32_t part);
/* Writes next (its tps taken over) for m, or (next NULL) m's tombstone,
 * and calls done(m, arg, err) once, later, when the high watermark covers
 * it (err KP_NONE: m->cur is next now) or it failed (m->cur unchanged).
 * m->pending is true meanwhile.  Returns an error without calling done
 * when nothing could be appended. */
typedef void (*txn_write_done)(txn_meta *m, void *arg, int16_t err);
int16_t txn_log_write(bk_broker *b, txn_meta *m, txn_rec *next, txn_write_done done, void *arg);
/* Frees m when it was unloaded and nothing is in flight for it (txn_log.c T4);
 * true when freed. */
bool txn_meta_release(txn_meta *m);
void txn_rec_free(txn_rec *r);
/* One __transaction_state record as the load reads it (txn_log.c), pure:
 * TXN_DEC_SKIP (not a TransactionLogKey v0 with an id, or a value this
 * broker does not read or cannot hold), TXN_DEC_TOMBSTONE with *id, or
 * TXN_DEC_STATE with *id and *rec (owned: txn_rec_free).  *id borrows
 * from r's key; arena (reset here) holds the decoded value meanwhile. */
enum { TXN_DEC_SKIP, TXN_DEC_TOMBSTONE, TXN_DEC_STATE };
int txn_log_decode(const kp_record *r, kp_arena *arena, kp_str *id, txn_rec *rec);
int txn_rec_copy(txn_rec *dst, const txn_rec *src);
int txn_log_start(bk_broker *b);
void txn_log_stop(void);

/* A deferred request: answer(op, err) encodes its response when the
 * write (or writes) it waits for are done; a connection gone first leaves
 * op->r NULL (nothing is sent). */
typedef struct txn_op txn_op;
typedef int (*txn_answer_fn)(txn_op *op, int16_t err);
struct txn_op {
    bk_req *r;
    bk_broker *b;
    txn_answer_fn answer;
    int16_t v;
    int64_t pid;
    int16_t epoch;
    void *ctx;                        /* the handler's */
    int waiting;                      /* writes still to come back */
};

/* ---- txn_coord.c: the state machine ----------------------------------------- */
/* A partition's load is done: its PrepareCommit / PrepareAbort ids get
 * their markers again. */
void txn_coord_loaded(txn_meta *m);
/* Starts aborting m's open transaction (fencing, a timeout): the epoch
 * bumped, PrepareAbort written, then markers.  KP_NONE or an error. */
int16_t txn_coord_abort(bk_broker *b, txn_meta *m);
/* Adds tps[0..n) to m's transaction (pid/epoch already checked); done
 * later with the result.  Used by AddPartitionsToTxn and AddOffsetsToTxn. */
int16_t txn_coord_add(bk_broker *b, txn_meta *m, const txn_tp *tps, size_t n,
                      txn_write_done done, void *arg);
/* 1 from txn_coord_add: every partition was in the transaction already,
 * nothing written, done will not be called (Kafka answers at once). */
#define TXN_ADDED_ALREADY 1
bool txn_coord_has(const txn_meta *m, const char *topic, size_t len, int32_t partition);
/* Kafka's producer checks of AddPartitionsToTxn / AddOffsetsToTxn / EndTxn:
 * KP_NONE, INVALID_PRODUCER_ID_MAPPING, PRODUCER_FENCED (INVALID_PRODUCER_EPOCH
 * below version fence_v), CONCURRENT_TRANSACTIONS. */
int16_t txn_coord_check(const txn_meta *m, int64_t pid, int16_t epoch, int16_t v,
                        int16_t fence_v);
txn_op *txn_op_new(bk_req *r, txn_answer_fn answer);
/* Answers op (when its connection lives) and frees it. */
void txn_op_finish(txn_op *op, int16_t err);
/* PRODUCER_FENCED, or INVALID_PRODUCER_EPOCH for versions below fence_v
 * (Kafka's KafkaApis mapping for clients that do not know the former). */
int16_t txn_fenced(int16_t v, int16_t fence_v);
int txn_coord_start(bk_broker *b);
void txn_coord_stop(void);

/* ---- txn_markers.c ----------------------------------------------------------- */
/* Writes m's markers (its PrepareCommit / PrepareAbort, m->cur) to every
 * partition of its transaction, then CompleteCommit / CompleteAbort. */
void txn_markers_start(bk_broker *b, txn_meta *m);
/* The id is unloaded: true when its markers were freed now (no call
 * out; a retry timer only), else they stop at their next callback (txn_markers.c K3). */
bool txn_markers_drop(struct txn_markers *k);
void txn_markers_free(struct txn_markers *k);
/* Shutdown: every id's markers are freed, whatever is out. */
void txn_markers_stop_all(void);

/* ---- txn_park.c: requests waiting for a busy id ---------------------------- */
/* A client request that met CONCURRENT_TRANSACTIONS for id: parked (BK_DEFER)
 * until the id is free, then handler(r) runs again over body (r->body as it
 * was before decoding); BK_RESPOND when it may not park (its time is up,
 * no memory): the caller answers CONCURRENT_TRANSACTIONS itself.  r->state
 * must be free.  txn_park.c P1-P3. */
int txn_park(bk_req *r, kp_rd body, int (*handler)(bk_req *r), kp_str id);
/* id's write ended or it left memory: its parked requests run again on the
 * next loop turn. */
void txn_park_wake(const char *id, size_t len);

/* ---- txn_ops.c: the counters of /metrics ------------------------------------ */
/* Kafka's TransactionState name of s (static text). */
const char *txn_state_name(int8_t s);
/* A Complete record is written (after its markers). */
void txn_ops_completed(bool commit);
/* The timeout started aborting a transaction. */
void txn_ops_timeout_abort(void);

#endif
