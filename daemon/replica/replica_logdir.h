/*
 * daemon/replica/replica_logdir.h — the log directory's health (daemon/replica/replica_logdir.c): Kafka's
 * log-dir failure handling for Sluice's one log directory (log.dirs'
 * first entry, which also holds the SQLite metadata).
 */
#ifndef SLUICE_LOGDIR_H
#define SLUICE_LOGDIR_H

#include <stdbool.h>
#include <stdint.h>

#include "daemon/broker.h"

/* A copy of the state, for /metrics and SQL (any thread may hold it). */
typedef struct bk_logdir_info {
    bool failed;
    int err;                         /* errno of the failure; 0 when healthy */
    int64_t failed_ms;               /* wall clock of the failure; -1 none */
    uint64_t failures;               /* times it failed since the process started */
    char error[512];                 /* the failure in words; "" when healthy */
} bk_logdir_info;

/* An append or flush of partition p (op: "appending to", "flushing", ...)
 * failed with errno err.  A storage fault (ENOSPC, EDQUOT, EIO, EROFS)
 * marks the log directory failed, logged once per failure in words:
 * cluster mode takes it offline until a restart (this broker leads and
 * follows nothing stored there and tells the controller); standalone keeps
 * serving reads and refuses writes until an append succeeds again.  true:
 * the directory is failed (the caller logs nothing more); false: not a
 * storage fault, the caller handles it as a partition's error. */
bool replica_logdir_fault(bk_broker *b, bk_partition *p, const char *op, int err);
/* Standalone: an append to p succeeded while the directory was failed. */
void replica_logdir_recovered(bk_broker *b, bk_partition *p);
/* The directory is failed (any mode); a load, cheap on the hot path. */
bool replica_logdir_failed(void);
/* Cluster mode and the directory failed: no partition here is led or
 * followed (view.c answers KAFKA_STORAGE_ERROR, repl_fetcher.c follows none). */
bool replica_logdir_offline(const bk_broker *b);
void replica_logdir_info_get(bk_logdir_info *out);

#endif
