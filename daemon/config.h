/*
 * Broker configuration: a Java-style properties file with Kafka's broker
 * key names, plus --override key=value.  Every key is known here; an
 * unknown key or a bad value stops startup with a message naming it.
 *
 * Topic-level defaults given under their broker names (log.retention.hours,
 * log.segment.bytes, log.flush.interval.ms, …) are collected, translated to
 * topic-level names, into topic_defaults: metadata/ resolves a topic's
 * effective config from them (source "broker").
 */
#ifndef SLUICE_CONFIG_H
#define SLUICE_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "metadata/md.h"

typedef struct bk_config {
    int32_t broker_id;                    /* broker.id */
    char listen_host[256];                /* from listeners=PLAINTEXT://host:port */
    int  listen_port;
    char advertised_host[256];            /* advertised.listeners, else listeners */
    int  advertised_port;
    char log_dirs[4096];                  /* log.dirs (first one is used) */
    char rack[64];                        /* broker.rack */
    int32_t num_partitions;               /* num.partitions */
    int16_t default_replication_factor;   /* default.replication.factor */
    bool auto_create_topics_enable;       /* auto.create.topics.enable */
    bool delete_topic_enable;             /* delete.topic.enable */
    int32_t socket_request_max_bytes;     /* socket.request.max.bytes */
    int64_t queued_max_request_bytes;     /* queued.max.request.bytes (-1 none) */
    int64_t connection_max_queued_bytes;  /* sluice: output cap per connection */
    int32_t max_connections;              /* max.connections */
    int32_t max_connections_per_ip;       /* max.connections.per.ip */
    int64_t connections_max_idle_ms;      /* connections.max.idle.ms */
    int64_t log_retention_check_interval_ms;
    /* log cleaner (daemon/cleaner.c) */
    bool    log_cleaner_enable;                   /* log.cleaner.enable */
    int32_t log_cleaner_threads;                  /* log.cleaner.threads */
    int64_t log_cleaner_dedupe_buffer_size;       /* log.cleaner.dedupe.buffer.size */
    double  log_cleaner_io_max_bytes_per_second;  /* log.cleaner.io.max.bytes.per.second */
    int64_t log_cleaner_backoff_ms;               /* log.cleaner.backoff.ms */
    int64_t log_flush_scheduler_interval_ms;
    int64_t log_flush_offset_checkpoint_interval_ms;
    int32_t fetch_max_bytes;              /* fetch.max.bytes (broker cap) */
    char zookeeper_connect[1024];         /* zookeeper.connect ("" = standalone) */
    char admin_listeners[256];            /* admin.listeners (HTTP) */
    char admin_token[256];                /* admin.token: bearer token for /sql, /metrics */
    int64_t admin_sql_timeout_ms;         /* admin.sql.timeout.ms: per statement */
    int64_t admin_sql_max_rows;           /* admin.sql.max.rows: per result */
    /* group coordinator (daemon/group.c) */
    int64_t group_initial_rebalance_delay_ms;     /* group.initial.rebalance.delay.ms */
    int32_t group_min_session_timeout_ms;         /* group.min.session.timeout.ms */
    int32_t group_max_session_timeout_ms;         /* group.max.session.timeout.ms */
    int64_t offsets_retention_minutes;            /* offsets.retention.minutes */
    int64_t offsets_retention_check_interval_ms;  /* offsets.retention.check.interval.ms */
    int32_t offset_metadata_max_bytes;            /* offset.metadata.max.bytes */
    int64_t offsets_commit_linger_ms;             /* offsets.commit.linger.ms: how
                                                     long commits may wait for
                                                     others due (group_persist.c C7) */
    /* Topic-level defaults from broker keys, by topic-level name. */
    md_kv *topic_defaults;
    size_t ntopic_defaults;
} bk_config;

void bk_config_init(bk_config *c);          /* Kafka defaults */
void bk_config_free(bk_config *c);
/* Loads a properties file (may be NULL for defaults only).  0 or -1 with a
 * message in err naming the file, line and key. */
int  bk_config_load(bk_config *c, const char *path, char *err, size_t errlen);
/* Applies one "key=value" (command line override).  0 or -1 with err. */
int  bk_config_set(bk_config *c, const char *key, const char *value,
                   char *err, size_t errlen);
/* Checks cross-key rules after everything is set. */
int  bk_config_finish(bk_config *c, char *err, size_t errlen);

#endif
