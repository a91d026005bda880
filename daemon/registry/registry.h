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

/* ---- writes for SQL (sr_sql.c; admin/sql_worker.c, loop thread) ------------------
 * The REST write a client would send, sent to this broker's own registry:
 * same checks, queue, forward to the leader and answer once durable.
 * done runs on a later loop turn with the HTTP status (200 ok; 0 no answer)
 * and Confluent's error_code and message, unless cancelled first.  NULL
 * with err: not sent (no registry here, https only, bad references). */
typedef struct sr_sql_call sr_sql_call;
typedef void (*sr_sql_done)(void *arg, int status, int error_code, const char *message);
/* Who the write is from, as the admin endpoint authenticated the SQL
 * client: the registry checks this principal's SUBJECT ACLs as it would
 * its REST request's (sr_sql.c Q3).  Read during the call only. */
typedef struct sr_sql_from {
    const char *principal;      /* NULL: may do all (admin.token, admin socket, no authorizer) */
    const char *host;           /* the SQL client's address, ACLs' host; NULL: unknown */
    const char *authorization;  /* its Authorization header, forwarded to the _schemas
                                 * leader as a REST write's is; NULL: none */
} sr_sql_from;
/* POST /subjects/{subject}/versions; type NULL: AVRO; refs: JSON text or NULL. */
sr_sql_call *sr_sql_register(bk_broker *b, const sr_sql_from *from, const char *subject,
                             const char *schema, const char *type, const char *refs,
                             sr_sql_done done, void *arg, char *err, size_t errlen);
/* DELETE /subjects/{subject}/versions/{version}[?permanent=true]; version 0:
 * DELETE /subjects/{subject}[?permanent=true]. */
sr_sql_call *sr_sql_delete(bk_broker *b, const sr_sql_from *from, const char *subject,
                           int32_t version, bool permanent, sr_sql_done done, void *arg,
                           char *err, size_t errlen);
/* PUT /config/{subject} {"compatibility": value} (mode: /mode/{subject}
 * {"mode": value}); value NULL: DELETE /config/{subject} (/mode/{subject}). */
sr_sql_call *sr_sql_setting(bk_broker *b, const sr_sql_from *from, const char *subject,
                            bool mode, const char *value, sr_sql_done done, void *arg,
                            char *err, size_t errlen);
/* done will not run (its waiter is going away). */
void sr_sql_cancel(sr_sql_call *c);

#endif
