/*
 * daemon/link/link_int.h — the link room's own: a link, its mirror topics,
 * and the calls between link.c (the model, SQL, states) and link_conn.c
 * (the connection to the source and its requests).
 */
#ifndef SLUICE_LINK_INT_H
#define SLUICE_LINK_INT_H

#include "daemon/link/link.h"
#include "metadata/md.h"

struct bufferevent;
struct event;
struct evdns_base;

/* The largest answer frame read from the source (link_conn.c C2), and so
 * the largest fetch.max.bytes / max.partition.fetch.bytes accepted: 1 MiB
 * left for the answer's headers. */
#define LK_FRAME_MAX (256 << 20)
#define LK_FETCH_BYTES_MAX (LK_FRAME_MAX - (1 << 20))

enum lk_mstate { LK_ACTIVE, LK_PAUSED, LK_PROMOTING, LK_PROMOTED, LK_FAILED_OVER, LK_FAILED };
enum lk_conn { LK_IDLE, LK_CONNECTING, LK_READY, LK_WAITING, LK_BACKOFF };

typedef struct lk_part {
    int64_t source_end;                  /* the source's high watermark, last answer; -1 */
    int64_t caught_up_ms;                /* wall clock: the mirror last had all of it; -1 */
    int64_t fetch_offset;                /* in the request out */
    int64_t retry_us;                    /* mono; 0: fetch now */
    uint8_t answers_due;                 /* promoting: answers to await before source_end
                                          * counts (link.c K3); only apply_partition lowers */
    bool in_request;
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
    bool ends_dirty;                     /* source ends to save (link.c K5) */
    bool in_request;                     /* in the Metadata / DescribeConfigs out */
    bool configs_due;                    /* created: its source's configs to compare */
    char last_error[MD_ERRLEN];
    struct lk_mirror *next;
} lk_mirror;

typedef struct lk_link {
    bk_broker *b;
    struct lk_set *set;
    char name[MD_TOPIC_NAME_MAX + 1];
    char host[256];
    int port;
    /* settings (Kafka's client property names, link.c) */
    bool sasl;                           /* security.protocol=SASL_PLAINTEXT, PLAIN */
    char user[128], pass[256];
    int32_t fetch_max_wait_ms, fetch_min_bytes, fetch_max_bytes, partition_max_bytes;
    int64_t metadata_max_age_ms, backoff_ms, backoff_max_ms;
    /* the connection (link_conn.c) */
    enum lk_conn conn;
    struct bufferevent *bev;
    struct event *timer;
    int16_t api_out;
    int32_t corrid;
    int64_t metadata_due_us;             /* mono: next Metadata of the sources */
    int64_t backoff_cur_ms;
    kp_buf out;
    uint8_t *in;                         /* the answer being handled (link_conn.c C2) */
    uint32_t in_cap;
    struct event *rev;                   /* answers read here (link_conn.c C4) */
    uint32_t in_got;                     /* link_conn.c C4: bytes of the answer read */
    int rcvlowat;                        /* link_conn.c C4: the socket's SO_RCVLOWAT */
    kp_arena arena;
    char last_error[MD_ERRLEN];          /* as stored (cluster_links.last_error) */
    struct lk_link *next;
} lk_link;

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
void lk_conn_kick(lk_link *l);           /* fetch or connect now, if idle */
void lk_conn_close(lk_link *l);

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

#endif
