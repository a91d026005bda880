/*
 * daemon/replication/repl_isr.h — what replication needs of cluster mode,
 * so that replication/ never includes cluster/: its calls (the ISR znode
 * write, the controlled-shutdown and recovery questions), given to
 * repl_isr_install as b->repl_ops; and the session's state (cl_start sets
 * b->repl to its bk_cluster's repl_cluster while b->cl is set): the
 * resync state, and replication's own (the fetchers, the last ISR check).
 */
#ifndef SLUICE_REPL_ISR_H
#define SLUICE_REPL_ISR_H

#include <stdbool.h>
#include <stdint.h>

#include "daemon/view/view.h"
#include "metadata/md.h"

#define CL_MAX_BROKERS 1024           /* the most brokers a cluster has */

/* A write's answer: rc is ZooKeeper's (ZOK, ZBADVERSION...), rc_str its
 * name.  The write's argument starts with this: the writer calls done. */
typedef struct repl_isr_done {
    void (*done)(bk_broker *b, int rc, const char *rc_str, struct repl_isr_done *arg);
} repl_isr_done;

typedef struct repl_cluster_ops {
    /* Writes st to path conditional on version; arg->done answers. */
    void (*isr_write)(bk_broker *b, const char *path, const md_partition_state *st,
                      int version, repl_isr_done *arg);
    /* id asked for a controlled shutdown (cl_broker_shutting). */
    bool (*broker_shutting)(bk_broker *b, int32_t id);
    /* The view of p changed (cl_recovery_view_changed). */
    void (*view_changed)(bk_broker *b, bk_partition *p);
    /* An ISR change was written (cl_ctl_isr_counted). */
    void (*isr_counted)(bk_broker *b, bool shrink);
} repl_cluster_ops;

typedef struct repl_cluster {
    const bool *synced;              /* a full resync finished in this session */
    struct fe_set *fetchers;         /* the replica fetchers (repl_fetcher.c) */
    struct pc_set *peers;            /* peer calls, made on first use (repl_peer.c) */
    int64_t isr_checked_ms;          /* last ISR lag check (repl_isr.c) */
} repl_cluster;

/* Cluster mode, before any log opens (main.c): the high watermark after
 * an append comes from the ISR (replica.h bk_isr_hooks); ops: cluster
 * mode's calls (b->repl_ops). */
void repl_isr_install(bk_broker *b, const repl_cluster_ops *ops);
/* Writes partition's state znode with a new ISR (same leader and epochs),
 * conditional on the version the mirror shows; the mirror's watch brings
 * it into the view.  why goes into the log line.  0: sent; -1: not (not
 * the leader in the view, no state znode, no session). */
int  repl_isr_change(bk_broker *b, const char *topic, int32_t partition, const int32_t *isr,
                   int32_t nisr, const char *why);
/* The same write with p's ISR as it is and leader epoch `epoch` (above the
 * view's): a leader whose log holds a higher epoch than its own (a mirror
 * topic promoted: its history is the source's, daemon/link/link.c K14).
 * 0: sent (one at a time, as ISR changes); -1: not. */
int  repl_isr_epoch_raise(bk_broker *b, bk_partition *p, int32_t epoch, const char *why);

#endif
