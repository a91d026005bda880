/*
 * daemon/registry/registry.h — the schema registry as sluiced starts and
 * stops it: Confluent Schema Registry's REST API on its own HTTP listener
 * (schema.registry.listeners), its state in the compacted _schemas topic
 * (daemon/registry/sr_log.c).  The rest of the room is sr_int.h's.
 */
#ifndef SLUICE_REGISTRY_H
#define SLUICE_REGISTRY_H

#include "daemon/broker.h"

/* Loads _schemas (when this broker has it) and binds the listener; after
 * view_topics_load.  0, or -1 with err (a malformed or taken explicit
 * address). */
int  sr_start(bk_broker *b, char *err, size_t errlen);
/* After the loop has stopped: writes in flight end unanswered. */
void sr_stop(bk_broker *b);
/* GET /metrics' lines of the registry (Prometheus text).  Loop thread. */
void sr_metrics_render(bk_broker *b, kp_buf *out);

#endif
