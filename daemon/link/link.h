/*
 * daemon/link/link.h — cluster links and mirror topics (issue 33): a link
 * is a source cluster (bootstrap servers, client settings in Kafka's
 * property names); a mirror topic is a local topic the link fills from a
 * source topic with consumer Fetches, appending the source's batches
 * unchanged at the source's offsets.  Operated through SQL (the views
 * cluster_links and mirror_topics, admin/sql_surface.c); link.c tells the
 * states and invariants.  Loop thread only.
 */
#ifndef SLUICE_LINK_H
#define SLUICE_LINK_H

#include <stdbool.h>
#include <stddef.h>

#include "daemon/broker.h"
#include "protocol/kp.h"

typedef struct bk_topic_op bk_topic_op;   /* daemon/view/view.h */

/* Loads the links and mirror topics from SQLite and starts mirroring
 * (standalone only: cluster mode starts none yet, link.c K6).  0, or -1
 * with err. */
int  link_start(bk_broker *b, char *err, size_t errlen);
void link_stop(bk_broker *b);

/* The SQL writes (admin/sql_worker.c), on the loop: KP_NONE or a Kafka
 * error code with a message in err.  Each is stored before it returns. */
/* A new link's TLS context, made from its config before the write reaches
 * the loop (admin/sql_worker.c, on a worker thread: the certificate and
 * key files are read there, never on the loop, where a FIFO or a hung
 * NFS path would stop the broker).  ctx NULL and rc KP_NONE: no TLS (or
 * a config the loop refuses anyway); rc: the file's error, in err. */
typedef struct lk_tls_pre {
    struct ssl_ctx_st *ctx;
    int rc;
    char err[512];
} lk_tls_pre;
/* Any thread. */
void link_tls_prepare(const char *config, lk_tls_pre *p);
void link_tls_pre_free(lk_tls_pre *p);

/* tls: link_tls_prepare's for config (its context taken over), or NULL
 * (the files read here). */
int link_create(bk_broker *b, const char *name, const char *bootstrap, const char *config,
                lk_tls_pre *tls, char *err, size_t errlen);
/* name's bootstrap servers and settings replaced (link.c K16): config as
 * INSERT's, a secret written back as SELECT shows it keeping its stored
 * value; tls as link_create's; base: link_config_kept's for config (the
 * UPDATE refused when the row changed since), 0 when none was asked. */
int link_update(bk_broker *b, const char *name, const char *bootstrap, const char *config,
                uint64_t base, lk_tls_pre *tls, char *err, size_t errlen);
/* A secret setting's value as SELECT shows it. */
#define LINK_MASK "[hidden]"
/* config with each secret line written as SELECT shows it (k=[hidden])
 * given the stored value of k (link.c K16), into out (cap: at least
 * LINK_CONFIG_KEPT_MAX): for the worker that reads an UPDATE's
 * certificate files (admin/sql_worker.c); refused when a secret is kept
 * while bootstrap or a setting that says where it goes changes; *base:
 * the row's state they came from, for link_update.  KP_NONE or an error
 * in err. */
#define LINK_CONFIG_KEPT_MAX (8192 + 2048 + 1)
int link_config_kept(bk_broker *b, const char *name, const char *bootstrap, const char *config,
                     char *out, size_t cap, uint64_t *base, char *err, size_t errlen);
int link_delete(bk_broker *b, const char *name, char *err, size_t errlen);
/* source NULL: the same name; state NULL: active. */
int link_mirror_create(bk_broker *b, const char *topic, const char *link, const char *source,
                       const char *state, char *err, size_t errlen);
int link_mirror_delete(bk_broker *b, const char *topic, char *err, size_t errlen);
/* 'active', 'paused', 'promoted' (answered at once; the row reads
 * 'promoting' until the mirror has caught up) or 'failed_over' (cluster
 * mode: answered once ZooKeeper holds it, through op when op is not NULL
 * and op->pending is set; view.h's bk_topic_op; link.c K15). */
int link_mirror_state(bk_broker *b, const char *topic, const char *state, bk_topic_op *op,
                      char *err, size_t errlen);

/* Produce: topic is a mirror topic not promoted yet; *msg says so
 * (static).  O(mirror topics) string compares; nothing when none. */
bool link_mirror_refuses(bk_broker *b, const char *topic, const char **msg);
/* Cluster mode, b->mirror_led: a partition of topic is led here after a
 * view change; a mirror that left mirroring takes its link.c K14 duty now (its
 * raise landed: the local start, then producers), not at the next second. */
void link_mirror_led(bk_broker *b, const char *topic);

/* /metrics: each mirror partition's lag (source log end minus mirror log
 * end) and each link's state. */
void link_metrics(bk_broker *b, kp_buf *out);

/* ---- pure pieces (unit tested) ----------------------------------------------- */
/* A secret setting (shown masked, stored apart): its name has password,
 * secret or jaas in it, or is ssl.key*. */
bool link_setting_secret(const char *name);
/* PLAIN's username and password out of a sasl.jaas.config value
 * (username="u" password="p"); false when either is missing. */
bool link_jaas_plain(const char *jaas, char *user, size_t ulen, char *pass, size_t plen);
/* Whether the filters of a Confluent filter setting's JSON value (top:
 * "groupFilters" or "topicFilters"; link_sync.c) pick name: 1 or 0; -1
 * with err when the value is refused. */
int link_filters_pick(const char *json, const char *top, const char *name, char *err,
                      size_t errlen);

#endif
