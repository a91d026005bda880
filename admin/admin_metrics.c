/*
 * admin/admin_metrics.c — the Prometheus text of GET /metrics: what the loop
 * thread owns, read from every room of the broker (connections, topics,
 * SASL, replication, the log directory, every local partition), around the
 * request and fsync counters of daemon/net/net_metrics.c.  Consumer lag is
 * appended by an SQL worker (sql_worker.c), since it joins committed offsets
 * from SQLite.
 *
 * Names follow Prometheus conventions with Kafka's vocabulary: bytes and
 * messages "in" (produced) and "out" (fetched), log start/end offsets,
 * high watermark.
 */
#include "admin/admin.h"

#include <stdio.h>
#include <string.h>

#include "daemon/cluster/cluster.h"
#include "daemon/md_sync.h"
#include "daemon/net/net_metrics.h"
#include "daemon/replica/replica.h"
#include "daemon/replica/replica_logdir.h"
#include "daemon/replication/repl_fetcher.h"
#include "daemon/registry/registry.h"
#include "daemon/link/link.h"
#include "daemon/replication/repl_peer.h"
#include "daemon/security/sec_sasl.h"
#include "daemon/txn/txn.h"
#include "daemon/view/view.h"

struct part_metric { const char *name, *help, *type; };
static const struct part_metric part_metrics[] = {
    { "sluice_partition_bytes_in_total", "Bytes appended to the partition (produced).", "counter" },
    { "sluice_partition_messages_in_total", "Records appended to the partition.", "counter" },
    { "sluice_partition_bytes_out_total", "Bytes sent to fetchers from the partition.", "counter" },
    { "sluice_log_size_bytes", "Size of the partition's segment files.", "gauge" },
    { "sluice_log_segments", "Segments in the partition log.", "gauge" },
    { "sluice_log_start_offset", "First offset kept in the partition.", "gauge" },
    { "sluice_log_end_offset", "Next offset to be assigned in the partition.", "gauge" },
    { "sluice_high_watermark", "Last committed offset + 1 of the partition.", "gauge" },
    { "sluice_log_recovery_point", "Offset below which the partition is flushed (fdatasync).", "gauge" },
    { "sluice_log_flushes_total", "fdatasyncs of the partition completed (flush.messages / flush.ms).", "counter" },
    { "sluice_log_segments_deleted_total", "Segments removed by retention or DeleteRecords.", "counter" },
    { "sluice_log_bytes_deleted_total", "Bytes of segments removed by retention or DeleteRecords.", "counter" },
    { "sluice_log_cleaner_runs_total", "Compactions of the partition that swapped segments in.", "counter" },
    { "sluice_log_cleaner_bytes_freed_total", "Bytes compaction removed from the partition.", "counter" },
    { "sluice_log_cleaner_records_removed_total", "Records compaction removed (superseded values, old tombstones).", "counter" },
    { "sluice_log_cleaner_failures_total", "Compactions that failed (the log was left unchanged).", "counter" },
    { "sluice_log_cleaner_last_duration_seconds", "Time the last compaction of the partition took.", "gauge" },
    { "sluice_last_stable_offset_lag", "High watermark minus last stable offset: what open transactions hold back from read_committed consumers (Kafka's LastStableOffsetLag).", "gauge" },
    { "sluice_partition_open_transactions", "Producers with a transaction open in the partition.", "gauge" },
};

struct render { kp_buf *o; int which; };

/* Replication's health under the names Kafka's JMX exporter gives them:
 * UnderReplicatedPartitions and IsrShrinks/IsrExpands (ReplicaManager) of
 * the partitions this broker leads, OfflinePartitionsCount and
 * ActiveControllerCount (KafkaController: the active controller's alone),
 * MaxLag (messages the furthest-behind follower lacks, as its leader here
 * knows it). */
struct repl_health { bk_broker *b; int64_t under, offline, max_lag; };

static void health_topic(bk_topic *t, void *arg)
{
    struct repl_health *h = arg;
    int32_t me = h->b->cfg->broker_id;
    bool controller = h->b->cl && h->b->cl->active;
    for (int32_t i = 0; i < t->npartitions; i++) {
        const bk_pview *v = &t->parts[i];
        if (controller && (v->leader < 0 || !view_broker_alive(h->b, v->leader)))
            h->offline++;
        if (v->leader != me)
            continue;
        if (v->nisr < v->nreplicas)
            h->under++;
        const bk_partition *p = v->local;
        if (!p || !p->leading || p->followers_epoch != p->leader_epoch)
            continue;
        int64_t end = seg_log_end(p->log);
        for (int32_t k = 0; k < p->nfollowers; k++)
            if (p->followers[k].log_end >= 0 && end - p->followers[k].log_end > h->max_lag)
                h->max_lag = end - p->followers[k].log_end;
    }
}

static void render_replication(bk_broker *b, kp_buf *o)
{
    struct repl_health h = { b, 0, 0, 0 };
    if (bk_cluster_mode(b))
        view_topics_foreach(b, health_topic, &h);
    uint64_t shrinks, expands, ahead, dropped;
    cl_isr_counters(&shrinks, &expands);
    repl_fetchers_counters(&ahead, &dropped);
    kp_buf_printf(o, "# HELP kafka_server_replicamanager_underreplicatedpartitions Partitions led "
                  "here whose ISR is smaller than their replicas (UnderReplicatedPartitions).\n"
                  "# TYPE kafka_server_replicamanager_underreplicatedpartitions gauge\n"
                  "kafka_server_replicamanager_underreplicatedpartitions %lld\n"
                  "# HELP kafka_controller_kafkacontroller_offlinepartitionscount Partitions "
                  "without a live leader; reported by the active controller "
                  "(OfflinePartitionsCount).\n"
                  "# TYPE kafka_controller_kafkacontroller_offlinepartitionscount gauge\n"
                  "kafka_controller_kafkacontroller_offlinepartitionscount %lld\n"
                  "# HELP kafka_controller_kafkacontroller_activecontrollercount 1 on the active "
                  "controller (ActiveControllerCount).\n"
                  "# TYPE kafka_controller_kafkacontroller_activecontrollercount gauge\n"
                  "kafka_controller_kafkacontroller_activecontrollercount %d\n"
                  "# HELP kafka_server_replicamanager_isrshrinks_total ISR shrinks this broker "
                  "wrote (IsrShrinksPerSec).\n"
                  "# TYPE kafka_server_replicamanager_isrshrinks_total counter\n"
                  "kafka_server_replicamanager_isrshrinks_total %llu\n"
                  "# HELP kafka_server_replicamanager_isrexpands_total ISR expansions this broker "
                  "wrote (IsrExpandsPerSec).\n"
                  "# TYPE kafka_server_replicamanager_isrexpands_total counter\n"
                  "kafka_server_replicamanager_isrexpands_total %llu\n"
                  "# HELP kafka_server_replicafetchermanager_maxlag Messages the furthest-behind "
                  "follower of a partition led here lacks (MaxLag).\n"
                  "# TYPE kafka_server_replicafetchermanager_maxlag gauge\n"
                  "kafka_server_replicafetchermanager_maxlag %lld\n"
                  "# HELP sluice_replica_fetches_ahead_total Fetches this broker's replica "
                  "fetchers sent before appending the answer before them (far behind).\n"
                  "# TYPE sluice_replica_fetches_ahead_total counter\n"
                  "sluice_replica_fetches_ahead_total %llu\n"
                  "# HELP sluice_replica_fetch_answers_dropped_total Partitions' fetch answers "
                  "not appended: the partition's log end or leader moved while they were out.\n"
                  "# TYPE sluice_replica_fetch_answers_dropped_total counter\n"
                  "sluice_replica_fetch_answers_dropped_total %llu\n",
                  (long long)h.under, (long long)h.offline, b->cl && b->cl->active ? 1 : 0,
                  (unsigned long long)shrinks, (unsigned long long)expands, (long long)h.max_lag,
                  (unsigned long long)ahead, (unsigned long long)dropped);
}

/* Requests to other brokers (daemon/replication/repl_peer.c): WriteTxnMarkers,
 * AddPartitionsToTxn verification. */
static void render_peer_calls(kp_buf *o)
{
    uint64_t sent, failed;
    repl_peer_counters(&sent, &failed);
    kp_buf_printf(o, "# HELP sluice_peer_requests_total Requests this broker sent to other "
                  "brokers (transaction markers, verifications).\n"
                  "# TYPE sluice_peer_requests_total counter\n"
                  "sluice_peer_requests_total %llu\n"
                  "# HELP sluice_peer_requests_failed_total Calls to other brokers that got no "
                  "answer: broker not alive, connection lost, timed out, stopping.\n"
                  "# TYPE sluice_peer_requests_failed_total counter\n"
                  "sluice_peer_requests_failed_total %llu\n",
                  (unsigned long long)sent, (unsigned long long)failed);
}

/* The transaction coordinator's numbers (daemon/txn/txn_ops.c), for the ids
 * this broker coordinates. */
static void render_txn(kp_buf *o)
{
    txn_stats s;
    txn_stats_get(&s);
    kp_buf_printf(o, "# HELP sluice_transactions_ongoing Transactions open now (Ongoing, "
                  "PrepareCommit, PrepareAbort) among the transactional ids coordinated here.\n"
                  "# TYPE sluice_transactions_ongoing gauge\n"
                  "sluice_transactions_ongoing %lld\n"
                  "# HELP sluice_transactions_committed_total Transactions committed (every "
                  "marker written) since the broker started.\n"
                  "# TYPE sluice_transactions_committed_total counter\n"
                  "sluice_transactions_committed_total %lld\n"
                  "# HELP sluice_transactions_aborted_total Transactions aborted (every marker "
                  "written) since the broker started: by the producer, fencing, the timeout "
                  "or an operator.\n"
                  "# TYPE sluice_transactions_aborted_total counter\n"
                  "sluice_transactions_aborted_total %lld\n"
                  "# HELP sluice_transactions_timeout_aborts_total Transactions the coordinator "
                  "began to abort because they outlived their timeout.\n"
                  "# TYPE sluice_transactions_timeout_aborts_total counter\n"
                  "sluice_transactions_timeout_aborts_total %lld\n"
                  "# HELP sluice_transactions_operator_aborts_total Transactions an operator "
                  "aborted through SQL (UPDATE transactions SET state = 'CompleteAbort').\n"
                  "# TYPE sluice_transactions_operator_aborts_total counter\n"
                  "sluice_transactions_operator_aborts_total %lld\n",
                  (long long)s.ongoing, (long long)s.commits, (long long)s.aborts,
                  (long long)s.timeout_aborts, (long long)s.operator_aborts);
}

/* The log directory's health (daemon/replica/replica_logdir.c), as Kafka's LogManager
 * gauges OfflineLogDirectoryCount and LogDirectoryOffline. */
static void render_log_dir(bk_broker *b, kp_buf *o)
{
    bk_logdir_info ld;
    replica_logdir_info_get(&ld);
    kp_buf_printf(o, "# HELP kafka_log_logmanager_offlinelogdirectorycount Log directories "
                  "offline after a storage fault (OfflineLogDirectoryCount).\n"
                  "# TYPE kafka_log_logmanager_offlinelogdirectorycount gauge\n"
                  "kafka_log_logmanager_offlinelogdirectorycount %d\n"
                  "# HELP kafka_log_logmanager_logdirectoryoffline 1 while the log directory is "
                  "offline (LogDirectoryOffline).\n"
                  "# TYPE kafka_log_logmanager_logdirectoryoffline gauge\n"
                  "kafka_log_logmanager_logdirectoryoffline{logDirectory=\"%s\"} %d\n"
                  "# HELP sluice_log_dir_failures_total Times the log directory failed (an "
                  "append or flush met ENOSPC, EDQUOT, EIO or EROFS).\n"
                  "# TYPE sluice_log_dir_failures_total counter\n"
                  "sluice_log_dir_failures_total %llu\n", ld.failed ? 1 : 0, b->data_dir,
                  ld.failed ? 1 : 0, (unsigned long long)ld.failures);
}

static void render_replica(bk_partition *p, void *arg)
{
    struct render *r = arg;
    const bk_topic *t = p->topic;
    {
        uint64_t v = 0;
        switch (r->which) {
        case 0: v = p->bytes_in; break;
        case 1: v = p->messages_in; break;
        case 2: v = p->bytes_out; break;
        case 3: v = seg_size_bytes(p->log); break;
        case 4: v = (uint64_t)seg_segment_count(p->log); break;
        case 5: v = (uint64_t)seg_log_start(p->log); break;
        case 6: v = (uint64_t)seg_log_end(p->log); break;
        case 7: v = (uint64_t)p->high_watermark; break;
        case 8: v = (uint64_t)seg_recovery_point(p->log); break;
        case 9: v = p->flushes; break;
        case 10: v = p->segments_deleted; break;
        case 11: v = p->bytes_deleted; break;
        case 12: v = p->cleaner_runs; break;
        case 13: v = p->cleaner_bytes_freed; break;
        case 14: v = p->cleaner_records_removed; break;
        case 15: v = p->cleaner_failures; break;
        case 17: v = (uint64_t)(p->high_watermark - replica_partition_lso(p)); break;
        case 18: v = p->producers ? p->producers->open_txns : 0; break;
        case 16:
            kp_buf_printf(r->o, "%s{topic=\"%s\",partition=\"%d\"} %.6f\n",
                          part_metrics[r->which].name, t->name, p->id,
                          (double)p->cleaner_last_us / 1e6);
            return;
        }
        kp_buf_printf(r->o, "%s{topic=\"%s\",partition=\"%d\"} %llu\n",
                      part_metrics[r->which].name, t->name, p->id, (unsigned long long)v);
    }
}

void bk_admin_metrics_render(bk_broker *b, kp_buf *o)
{
    kp_buf_printf(o, "# HELP sluice_up The broker is serving.\n# TYPE sluice_up gauge\n"
                  "sluice_up{broker_id=\"%d\"} 1\n", b->cfg->broker_id);
    kp_buf_printf(o, "# HELP sluice_connections Open client connections.\n"
                  "# TYPE sluice_connections gauge\nsluice_connections %d\n", b->nconns);
    kp_buf_printf(o, "# HELP sluice_topics Topics.\n# TYPE sluice_topics gauge\n"
                  "sluice_topics %zu\n", b->ntopics);

    sec_sasl_metrics_render(o);
    net_metrics_render_counters(o);

    uint64_t msyncs, mbatches, mckpts;
    bk_mdsync_stats(&msyncs, &mbatches, &mckpts);
    kp_buf_printf(o, "# HELP sluice_metadata_syncs_total fdatasyncs of the metadata WAL "
                  "(offset commits, group state: offsets.commit.linger.ms).\n"
                  "# TYPE sluice_metadata_syncs_total counter\n"
                  "sluice_metadata_syncs_total %llu\n"
                  "# HELP sluice_metadata_sync_batches_total Metadata write batches those "
                  "fdatasyncs made durable.\n"
                  "# TYPE sluice_metadata_sync_batches_total counter\n"
                  "sluice_metadata_sync_batches_total %llu\n"
                  "# HELP sluice_metadata_checkpoints_total Checkpoints of the metadata WAL.\n"
                  "# TYPE sluice_metadata_checkpoints_total counter\n"
                  "sluice_metadata_checkpoints_total %llu\n", (unsigned long long)msyncs,
                  (unsigned long long)mbatches, (unsigned long long)mckpts);

    render_replication(b, o);
    render_log_dir(b, o);
    render_peer_calls(o);
    render_txn(o);
    sr_metrics_render(b, o);
    link_metrics(b, o);

    for (int m = 0; m < (int)(sizeof part_metrics / sizeof part_metrics[0]); m++) {
        kp_buf_printf(o, "# HELP %s %s\n# TYPE %s %s\n", part_metrics[m].name,
                      part_metrics[m].help, part_metrics[m].name, part_metrics[m].type);
        struct render r = { o, m };
        replica_replicas_foreach(b, render_replica, &r);
    }
}
