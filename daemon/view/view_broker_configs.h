/*
 * daemon/view/view_broker_configs.h — dynamic broker configs (daemon/view/view_broker_configs.c):
 * what AlterConfigs / IncrementalAlterConfigs set on a BROKER resource.
 */
#ifndef SLUICE_BROKER_CONFIGS_H
#define SLUICE_BROKER_CONFIGS_H

#include <stdbool.h>

#include "daemon/broker.h"
#include "daemon/view/view.h"

/* After view_topics_load: reads the stored sets and applies them to every
 * topic.  0, or -1 (logged) when the store cannot be read. */
int view_broker_configs_init(bk_broker *b);

/* Whether Kafka lets key change at runtime here: the broker key of a
 * topic-level config ("log.retention.ms", "message.max.bytes", ...). */
bool view_broker_config_dynamic(const char *key);

/* The dynamic value of a broker key: from this broker's set (*source
 * DYNAMIC_BROKER_CONFIG, 2), else from the cluster-wide default's
 * (DYNAMIC_DEFAULT_BROKER_CONFIG, 3); NULL when neither sets it.
 * def_only: look at the default's set alone. */
const char *view_broker_config_dynamic_value(const char *key, bool def_only, int8_t *source);

/* The topic defaults of the properties file (topic-level names), before
 * any dynamic layer: STATIC_BROKER_CONFIG. */
const md_kv *view_broker_configs_static(bk_broker *b, size_t *n);

/* A replication throttle (leader.replication.throttled.rate,
 * follower.replication.throttled.rate) in bytes/s: its dynamic value, else
 * the properties file's; 0 when unthrottled (0, or 1 TB/s and up: Kafka's
 * default Long.MAX_VALUE is no throttle). */
int64_t view_broker_config_rate(const bk_broker *b, const char *key);

/* The stored set of one resource ("" the default, else this broker's id):
 * a copy, md_kv_free.  KP_NONE or KP_UNKNOWN_SERVER_ERROR. */
int view_broker_configs_get(bk_broker *b, const char *resource, md_kv **kv, size_t *n);

/* Replaces one resource's set: every key must be dynamic (else
 * INVALID_REQUEST naming them, Kafka's "Cannot update these configs
 * dynamically"), every value valid (INVALID_CONFIG); then stored in
 * SQLite and applied live to every topic's effective config (standalone),
 * or written to ZooKeeper and adopted as read back (cluster mode: KP_NONE
 * with op->pending, op->done brings the answer; view.h's bk_topic_op).
 * Nothing changes on an error or with validate_only. */
int view_broker_configs_set(bk_broker *b, const char *resource, const md_kv *kv, size_t n,
                          bool validate_only, bk_topic_op *op, char *msg, size_t msglen);

/* The set of one resource as the store of truth has it (standalone: the
 * request; cluster mode: ZooKeeper's znode as read): stored in SQLite and
 * applied, unless it is the set applied already.  KP_NONE or
 * KP_UNKNOWN_SERVER_ERROR (logged). */
int view_broker_configs_adopt(bk_broker *b, const char *resource, const md_kv *kv, size_t n);

#endif
