/*
 * daemon/link/link_int.h — the link room's own: a link, its mirror topics,
 * and the calls between link.c (the model, SQL, states) and link_conn.c
 * (the connection to the source and its requests).
 */
#ifndef SLUICE_LINK_INT_H
#define SLUICE_LINK_INT_H

#include "daemon/link/link.h"
#include "daemon/replication/repl_frame.h"
#include "daemon/security/sec_sasl_client.h"
#include "metadata/md.h"

struct bufferevent;
struct event;
struct evdns_base;
struct ssl_ctx_st;

/* The largest answer frame read from the source (link_conn.c C2), and so
 * the largest fetch.max.bytes / max.partition.fetch.bytes accepted: 1 MiB
 * left for the answer's headers. */
#define LK_FRAME_MAX (256 << 20)
#define LK_FETCH_BYTES_MAX (LK_FRAME_MAX - (1 << 20))
#define LK_FLOOR_WAIT_US (20 * 1000)  /* link.c K7: a floor being raised in ZooKeeper */

enum lk_mstate { LK_ACTIVE, LK_PAUSED, LK_PROMOTING, LK_PROMOTED, LK_FAILED_OVER, LK_FAILED };
enum lk_conn { LK_IDLE, LK_CONNECTING, LK_READY, LK_WAITING, LK_BACKOFF };

typedef struct lk_part {
    int64_t source_end;                  /* the source's high watermark, last answer; -1 */
    int32_t leader;                      /* the source's leader (node id), last Metadata;
                                          * -1: unknown, asked again (link_conn.c C4) */
    int32_t leader_epoch;                /* its leader epoch there (CurrentLeaderEpoch); -1 */
    int32_t asked;                       /* in_request: the node the request went to */
    int32_t fetch_epoch;                 /* in a request (Fetch, OffsetForLeaderEpoch): the
                                          * leader epoch it carried (link_conn.c C1) */
    int32_t oe_epoch;                    /* truncating: the epoch asked about */
    int64_t oe_end;                      /* truncating: the log end it was asked at */
    bool truncating;                     /* to cut where it leaves the source first
                                          * (link_conn.c C5) */
    bool ahead;                          /* truncating since OFFSET_OUT_OF_RANGE with the
                                          * mirror ahead of the source (link_conn.c C5) */
    int64_t caught_up_ms;                /* wall clock: the mirror last had all of it; -1 */
    int64_t fetch_offset;                /* in the request out */
    int64_t retry_us;                    /* mono; 0: fetch now */
    uint8_t answers_due;                 /* promoting: answers to await before source_end
                                          * counts (link.c K3); only apply_partition lowers */
    bool in_request;
    int32_t told_epoch;                  /* promoting, cluster: the leader epoch this
                                          * broker told it caught up in (link.c K11); -1 */
    bool epoch_due;                      /* left mirroring here, cluster: a leader epoch
                                          * above the source's still to take (link.c K14) */
    int32_t source_epoch;                /* cluster: the log's latest epoch when the duty
                                          * first found it led here (link.c K14); -2 not yet */
    int32_t local_epoch;                 /* cluster: the first local epoch, as ZooKeeper
                                          * holds it (link.c K17); -1 not known yet */
    bool local_asking;                   /* cluster: asked for it, no answer yet */
} lk_part;

typedef struct lk_mirror {
    struct lk_link *link;
    char topic[MD_TOPIC_NAME_MAX + 1];
    char source[MD_TOPIC_NAME_MAX + 1];
    enum lk_mstate state;
    int32_t nparts;                      /* partitions fetched (the local topic's) */
    int32_t source_parts;                /* the source's count, last Metadata */
    lk_part *parts;
    bool created;                        /* the local topic exists (ours) */
    bool proposing;                      /* a terminal state on its way (link.c K15) */
    bool ends_dirty;                     /* source ends to save (link.c K5) */
    bool in_request;                     /* in the Metadata / DescribeConfigs out */
    bool configs_due;                    /* created: its source's configs to compare */
    char last_error[MD_ERRLEN];
    struct lk_mirror *next;
} lk_mirror;

/* A filter of Confluent's JSON ({"groupFilters" | "topicFilters": [{"name",
 * "patternType": LITERAL | PREFIXED, "filterType": INCLUDE | EXCLUDE}]});
 * a LITERAL "*" matches every name (link_sync.c). */
#define LK_FILTERS_MAX 16
typedef struct lk_filter {
    char name[MD_TOPIC_NAME_MAX + 1];
    bool prefixed, exclude;
} lk_filter;
typedef struct lk_filters {
    lk_filter f[LK_FILTERS_MAX];
    int n;
} lk_filters;

/* One of acl.filters' filters (Confluent's JSON, link_sync.c): the
 * ACLs it picks; "" or BK_*_ANY (1) match any. */
typedef struct lk_acl_filter {
    int8_t res, op, perm;
    char name[MD_TOPIC_NAME_MAX + 1];    /* the source's resource name */
    char principal[256], host[256];
} lk_acl_filter;

/* The sync settings (link_sync.c): consumer offsets, topic filters. */
typedef struct lk_sync_cfg {
    bool offsets;                        /* consumer.offset.sync.enable */
    int64_t offsets_ms;                  /* consumer.offset.sync.ms */
    lk_filters groups;                   /* consumer.offset.group.filters */
    bool auto_topics;                    /* auto.create.mirror.topics.enable */
    lk_filters topics;                   /* auto.create.mirror.topics.filters */
    bool acls;                           /* acl.sync.enable */
    int64_t acls_ms;                     /* acl.sync.ms */
    lk_acl_filter acl_f[LK_FILTERS_MAX]; /* acl.filters; nacl_f -1: not set */
    int nacl_f;
} lk_sync_cfg;
struct lk_sync;

/* One connection to a source broker (link_conn.c): the bootstrap one
 * (node -1: Metadata, DescribeConfigs, through the bootstrap servers in
 * turn) or a source broker's (node id: Fetch and OffsetForLeaderEpoch of
 * the partitions it leads).  Its own state, buffers and request: another
 * request kind can be sent to a chosen broker. */
typedef struct lk_peer {
    struct lk_link *link;
    int32_t node;                        /* -1: the bootstrap connection */
    bool admin;                          /* link_sync.c's own to node (ListGroups,
                                          * OffsetFetch): no Fetch waits before them */
    char host[256];
    int port;
    enum lk_conn conn;
    struct bufferevent *bev;
    struct event *timer;
    int16_t api_out;
    int32_t corrid;
    int64_t backoff_cur_ms;
    kp_buf out;
    repl_frame in;                       /* the answer being read (link_conn.c C2, C6) */
    struct event *rev;                   /* plaintext: answers read here (link_conn.c C6) */
    bk_sasl_client sasl;                 /* SASL_*: the login (link_conn.c C7) */
    int64_t reauth_us;                   /* mono: log in again (KIP-368, link_conn.c C7);
                                          * 0: never */
    kp_arena arena;
    struct lk_peer *next;
} lk_peer;

typedef struct lk_link {
    bk_broker *b;
    struct lk_set *set;
    char name[MD_TOPIC_NAME_MAX + 1];
    char bootstrap[1024];                /* host:port[,host:port…] as given */
    uint64_t row_sum;                    /* its row's settings, summed (link.c K13) */
    int nboot, boot_at;                  /* their count; the one boot uses */
    /* settings (Kafka's client property names, link.c) */
    bool sasl;                           /* security.protocol=SASL_PLAINTEXT or SASL_SSL */
    bool tls;                            /* security.protocol=SSL or SASL_SSL */
    char mechanism[16];                  /* sasl.mechanism: PLAIN, SCRAM-SHA-256/512 */
    char user[128], pass[256];
    char ssl_ca[1024];                   /* ssl.ca.location / ssl.truststore.location */
    const char *ssl_ca_key;              /* which of the two named it (messages) */
    char ssl_cert[1024], ssl_key[1024];  /* ssl.certificate.location, ssl.key.location
                                          * (or ssl.keystore.location: both in one) */
    const char *ssl_cert_key;            /* which of the two named ssl_cert (messages) */
    char ssl_key_pass[256];              /* ssl.key.password */
    bool ssl_check_host;                 /* ssl.endpoint.identification.algorithm=https */
    struct ssl_ctx_st *tls_ctx;          /* made from the ssl.* settings (link_conn.c C7) */
    struct lk_tls_job *tls_job;          /* tls_ctx being made off the loop (link_conn.c C7) */
    bk_sasl_keys keys;                   /* SCRAM's salted password (link_conn.c C7) */
    char who[MD_TOPIC_NAME_MAX + 32];    /* "cluster link NAME": SASL log lines */
    int32_t fetch_max_wait_ms, fetch_min_bytes, fetch_max_bytes, partition_max_bytes;
    int64_t metadata_max_age_ms, backoff_ms, backoff_max_ms;
    lk_sync_cfg sync_cfg;
    struct lk_sync *sync;                /* link_sync.c's state; NULL: none yet */
    /* the connections (link_conn.c) */
    lk_peer boot;                        /* Metadata, DescribeConfigs */
    lk_peer *peers;                      /* one per source broker leading a partition */
    int64_t metadata_due_us;             /* mono: next Metadata of the sources */
    int64_t metadata_sent_us;            /* mono: the last one (refreshes no faster than
                                          * reconnect.backoff.ms: link_conn.c C4) */
    char last_error[MD_ERRLEN];          /* as stored (cluster_links.last_error) */
    char cluster_id[128];                /* the source's, recorded (link.c K18); "": not yet */
    bool cluster_checked;                /* the bootstrap connection's Metadata showed it
                                          * (link_conn.c C8); nothing else asked before */
    bool cluster_none_told;              /* a source without a cluster id: logged once */
    struct lk_link *next;
} lk_link;

/* link_conn.c C7: a link's TLS context being made on b->calls. */
typedef struct lk_tls_job {
    lk_link *link;                       /* NULL: the link is gone */
    lk_link files;                       /* only its ssl.* settings */
    int rc;
    char err[512];
} lk_tls_job;

typedef struct lk_set {
    bk_broker *b;
    struct evdns_base *dns;
    struct event *tick;                  /* link.c K5: source ends saved each second */
    lk_link *links;
    lk_mirror *mirrors;
    int nmirrors;
    int64_t *ends, *caught;              /* on_tick's (link.c K5) */
    int32_t ends_cap;
} lk_set;

/* link_conn.c */
void lk_conn_init(lk_link *l);           /* the bootstrap connection, unconnected */
void lk_conn_kick(lk_link *l);           /* fetch or connect now, if idle */
void lk_conn_close(lk_link *l);          /* every connection; freed with lk_conn_free */
void lk_conn_free(lk_link *l);
/* The connection to source broker node (made, unconnected, or its address
 * updated; NULL: out of memory).  Another request kind for a chosen broker
 * (the group coordinator, any broker): which connection sends it goes in
 * link_conn.c next_request, its answer in handle_answer (by api_out). */
lk_peer *lk_peer_get(lk_link *l, int32_t node, kp_str host, int32_t port);
/* The same, for link_sync.c's group requests: a second connection to
 * node (as an Admin client's beside a consumer's), made while
 * lk_sync_wants it, so a Fetch long poll never delays them. */
lk_peer *lk_admin_peer_get(lk_link *l, int32_t node, kp_str host, int32_t port);

/* The link's TLS context, made from its ssl.* settings on first use
 * (KP_NONE, or KP_INVALID_CONFIG with err): link.c checks the files at
 * INSERT with it. */
int lk_conn_tls(lk_link *l, char *err, size_t errlen);

/* Frames and sends a request of api on the bootstrap connection (or on
 * c, lk_peer_send); WAITING after (or failed). */
void lk_conn_send(lk_link *l, int16_t api, int16_t version, const void *q);
void lk_peer_send(lk_peer *c, int16_t api, int16_t version, const void *q);
/* c has a request to send (link_sync.c): connected if idle, asked next
 * loop turn if ready; left alone while busy or backing off. */
void lk_peer_poke(lk_peer *c);

/* link_sync.c: consumer offsets synced, mirror topics picked by filters.
 * lk_sync_setting: one of its settings applied to l's sync_cfg (KP_NONE or
 * KP_INVALID_CONFIG with err), or -1 when k is not one of them. */
int  lk_sync_setting(lk_link *l, const char *k, const char *v, char *err, size_t errlen);
void lk_sync_defaults(lk_link *l);
void lk_sync_free(lk_link *l);
/* Connection node closed (-1: the bootstrap one): what it had out, or was
 * to send, is lost. */
void lk_sync_forgotten(lk_link *l, int32_t node);
/* Admin connection to node failed (why): the round's error if it had a
 * request of the round to answer (link_sync.c S4), not the link's. */
void lk_sync_conn_failed(lk_link *l, int32_t node, const char *why);
/* The source's brokers, from a Metadata answer (each round lists groups
 * on every one of them). */
struct kp_MetadataResponse_MetadataResponseBroker;
void lk_sync_brokers(lk_link *l, const struct kp_MetadataResponse_MetadataResponseBroker *br,
                     int32_t n);
/* Source broker node's connection has a group request to send or out
 * (kept, connected while so). */
bool lk_sync_wants(const lk_link *l, int32_t node);
/* READY, source broker c: its group request sent (true), if one is due. */
bool lk_sync_peer_send(lk_peer *c);
/* READY, before the Metadata: the mirrors that filters picked are created
 * (a creation may send the next request itself: true when one went out). */
bool lk_sync_topics_create(lk_link *l);
/* A topic of a Metadata answer of every topic (auto.create.mirror.topics). */
void lk_sync_topic_seen(lk_link *l, kp_str name);
/* After that answer: a mirror whose source topic it lacked has none. */
void lk_sync_metadata_done(lk_link *l);
/* READY, after the Configs: a sync request due (true: sent); *next_us
 * lowered to when one is due. */
bool lk_sync_send(lk_link *l, int64_t now_us, int64_t *next_us);
/* The answer on c to a request of lk_sync_send or lk_sync_peer_send;
 * -1: malformed. */
int  lk_sync_answer(lk_peer *c, int16_t api, kp_rd *r);
void lk_sync_metrics(lk_set *s, kp_buf *out);

/* link.c, for link_conn.c */
void lk_link_error(lk_link *l, const char *why);   /* NULL: healthy again */
void lk_mirror_error(lk_mirror *m, const char *why);
/* The source topic has n partitions, with these configs (DescribeConfigs'
 * topic overrides; NULL before they were asked): creates the local topic
 * or adds partitions. */
void lk_mirror_sourced(lk_mirror *m, int32_t n, const md_kv *cfg, size_t ncfg, bool have_cfg);
/* A created mirror's overrides made the source's (those valid here), when
 * they differ. */
void lk_mirror_configs(lk_mirror *m, const md_kv *cfg, size_t ncfg);
/* A partition's answer was applied: promoting mirrors may be done. */
void lk_mirror_progress(lk_mirror *m);
bool lk_mirror_fetching(const lk_mirror *m);
/* The i-th host:port of a bootstrap list (KP_NONE, or KP_INVALID_CONFIG
 * with err); *count gets how many there are. */
int lk_bootstrap_nth(const char *s, int i, char *host, size_t hlen, int *port, int *count,
                     char *err, size_t errlen);
/* Partition i of m's topic when this broker copies it (link.c K9): it
 * leads it; NULL otherwise. */
bk_partition *lk_copies(const lk_mirror *m, int32_t i);

#endif
