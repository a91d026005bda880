/*
 * The metadata sync worker (daemon/md_sync.c): makes the loop's SQLite
 * batches durable off the event loop, as group commits.
 */
#ifndef SLUICE_MD_SYNC_H
#define SLUICE_MD_SYNC_H

#include <stdint.h>

#include "daemon/broker.h"

/* Called on the loop thread when the syncs up to seq have finished;
 * err: 0, or the errno of a failed sync (latched: every later call
 * reports it too, see md_sync.c). */
typedef void (*bk_mdsync_fn)(uint64_t seq, int err);

/* Opens the worker's own connection to dbpath and starts the thread.
 * After md_open and event_base_new.  0 or -1 (logged). */
int bk_mdsync_start(bk_broker *b, const char *dbpath);
/* The one listener (the group coordinator). */
void bk_mdsync_listen(bk_mdsync_fn fn);
/* After an md_commit on the loop's handle whose durability matters:
 * returns the sequence number of a sync that will cover it.  0 when the
 * worker is not running (nothing to wait for: see bk_mdsync_stop). */
uint64_t bk_mdsync_request(void);
/* A write that runs on the worker, on its own connection, inside one
 * BEGIN IMMEDIATE … COMMIT of its own, just before the fdatasync that
 * makes it durable.  The submitter owns the job's memory and must leave
 * it (and everything run reads) untouched until the listener has seen a
 * sequence number >= job->seq; then job->rc holds run's result, or
 * MD_E_SQL when the transaction could not begin or commit. */
typedef struct bk_mdjob bk_mdjob;
struct bk_mdjob {
    int (*run)(md_db *db, bk_mdjob *job);  /* worker thread */
    bk_mdjob *next;                        /* worker's queue */
    uint64_t seq;                          /* set by bk_mdsync_submit */
    int rc;                                /* out */
};
/* Queues job behind the jobs already submitted (they run in this order)
 * and returns the sequence number of the sync that covers it (also in
 * job->seq).  Without a worker the job runs here, on b->db, each of its
 * changes synced when it returns (metadata/db.c D2), and 0 is returned. */
uint64_t bk_mdsync_submit(bk_broker *b, bk_mdjob *job);
/* Blocks until every sync up to seq has finished (shutdown only: the loop
 * must not wait for the disk while it serves). */
void bk_mdsync_wait(uint64_t seq);
/* The newest sequence number handed out, and the newest known durable
 * (loop thread). */
uint64_t bk_mdsync_requested(void);
uint64_t bk_mdsync_durable(void);
/* The latched sync error (errno) or 0. */
int bk_mdsync_error(void);
/* For /metrics: WAL fdatasyncs run, batches (jobs and requests) they
 * covered, checkpoints run.  Zeros without a worker. */
void bk_mdsync_stats(uint64_t *syncs, uint64_t *batches, uint64_t *checkpoints);
/* Finishes every requested sync, runs a last checkpoint, joins the
 * thread and closes its connection (before md_close of the loop's
 * handle, whose close checkpoints and syncs whatever came after). */
void bk_mdsync_stop(void);

#endif
