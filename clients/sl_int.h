/*
 * sl_int.h — libsluice internals shared by the files of clients/.  Not
 * installed; applications include only sluice.h.
 *
 * Ownership and locking (the one rule every file follows):
 *   - Each handle is an sl_client plus one role module (producer, consumer
 *     [+ group], admin).  cl->lock guards ALL mutable state of the handle:
 *     metadata, broker table, producer queues, consumer queues, group state.
 *   - The background thread (client.c, io_main) holds cl->lock except while
 *     it sleeps in poll(2) and while a module explicitly drops it for CPU
 *     work on data no other thread can reach (batch compression).
 *   - Application threads take cl->lock for short critical sections and
 *     wait on cl->cond, which is broadcast whenever something an
 *     application may wait for changes (metadata, delivery reports,
 *     fetched data, op completion).  They wake the background thread with
 *     sl_wakeup() (an eventfd) when they queue work for it.
 *   - Callbacks into the application run without cl->lock held.
 */
#ifndef SLUICE_SL_INT_H
#define SLUICE_SL_INT_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "clients/sluice.h"
#include "protocol/kp.h"
#include "protocol/kp_scram.h"

#define SL_API_MAX 70

/* ---- configuration (conf.c) ------------------------------------------- */
enum { SL_PART_MURMUR2_RANDOM, SL_PART_MURMUR2, SL_PART_CONSISTENT_RANDOM,
       SL_PART_RANDOM };
enum { SL_ASSIGN_RANGE = 1, SL_ASSIGN_ROUNDROBIN = 2 };
/* security.protocol: bit 1 TLS, bit 2 SASL. */
enum { SL_SEC_PLAINTEXT = 0, SL_SEC_SSL = 1, SL_SEC_SASL_PLAINTEXT = 2, SL_SEC_SASL_SSL = 3 };
enum { SL_SASL_PLAIN, SL_SASL_SCRAM_SHA_256, SL_SASL_SCRAM_SHA_512 };

struct sl_conf {
    char *bootstrap_servers;
    char *client_id;
    int request_timeout_ms, retry_backoff_ms, reconnect_backoff_ms;
    int reconnect_backoff_max_ms, metadata_max_age_ms, log_level;
    int socket_send_buffer_bytes;       /* 0: the system's default */
    /* security (client_sec.c): librdkafka's names and defaults */
    int security_protocol;              /* SL_SEC_PLAINTEXT, ... */
    int sasl_mechanism;                 /* SL_SASL_PLAIN, ... */
    int ssl_endpoint_identification;    /* 1: https (verify the host name), 0: none */
    char *sasl_username, *sasl_password;
    char *ssl_ca_location, *ssl_certificate_location, *ssl_key_location, *ssl_key_password;
    /* producer */
    int acks, linger_ms, batch_size, codec, enable_idempotence, retries;
    int delivery_timeout_ms, max_in_flight, max_block_ms, partitioner;
    int64_t buffer_memory;
    /* consumer */
    char *group_id;
    int64_t auto_offset_reset;          /* SL_OFFSET_BEGINNING/END/INVALID(none) */
    int enable_auto_commit, auto_commit_interval_ms, session_timeout_ms;
    int heartbeat_interval_ms, max_poll_interval_ms;
    int assignors[2], n_assignors;
    int fetch_min_bytes, fetch_max_bytes, max_partition_fetch_bytes;
    int fetch_max_wait_ms, queued_max_kbytes, enable_partition_eof;
    int allow_auto_create_topics;
    int isolation_level;                /* 0 read_uncommitted, 1 read_committed */
    /* callbacks */
    void *opaque;
    void (*log_cb)(int, const char *, void *);
    void (*dr_cb)(const sl_delivery *, void *);
    void (*rebalance_cb)(sl_consumer *, int, const sl_topic_partition *, int, void *);
    void (*commit_cb)(sl_consumer *, int, const sl_topic_partition *, int, void *);
};
void sl_conf_init_defaults(sl_conf *c);
int  sl_conf_copy(sl_conf *dst, const sl_conf *src);
void sl_conf_free_fields(sl_conf *c);

/* ---- frames and requests (client.c) --------------------------------------- */
/* One response frame, refcounted so fetched records can be handed to the
 * application without a copy. */
typedef struct sl_frame {
    int refs;                 /* under cl->lock */
    size_t len;
    uint8_t data[];
} sl_frame;
void sl_frame_unref(sl_frame *f);     /* caller holds cl->lock */

typedef struct sl_client sl_client;
typedef struct sl_broker sl_broker;
/* Response callback, on the background thread with cl->lock held.  err 0:
 * body is the response body (after the header), f its frame; err < 0
 * (SL_E_TRANSPORT, SL_E_TIMED_OUT, SL_E_DESTROYED): body and f NULL. */
typedef void sl_resp_cb(sl_client *cl, sl_broker *b, int err, sl_frame *f,
                        kp_rd *body, int16_t version, void *ctx);

typedef struct sl_req {
    struct sl_req *next;
    int32_t corrid;
    int16_t api, ver;
    int64_t deadline;
    sl_resp_cb *cb;
    void *ctx;
} sl_req;

/* TCP connect → [TLS handshake] → ApiVersions → [SASL login] → up
 * (client_sec.c for the bracketed steps). */
enum { SL_B_DOWN, SL_B_CONNECTING, SL_B_TLS, SL_B_APIVERSIONS, SL_B_SASL, SL_B_UP };

/* A region of caller memory sent in place, after out's first `at` bytes. */
typedef struct sl_oref {
    size_t at;
    const uint8_t *p;
    size_t len;
} sl_oref;

struct sl_broker {
    int32_t id;               /* node id; bootstrap entries are negative */
    char *host;
    int port;
    int fd, state;
    struct ssl_st *ssl;       /* TLS (client_sec.c); NULL in plaintext */
    bool tls_want_write;      /* OpenSSL waits for POLLOUT */
    int64_t tls_deadline;     /* the handshake's end: request.timeout.ms */
    int sasl_step;            /* tokens sent in this login */
    scram_client scram;       /* this login's SCRAM state */
    char *server_first;       /* SCRAM: kept for the AuthMessage */
    int64_t next_connect;
    int backoff_ms;
    bool wanted;              /* someone needs a connection */
    /* Outgoing stream: the bytes of out with the referenced regions of
     * refs spliced in at their offsets (sl_req_ref), written with one
     * sendmsg per pass.  out_sent counts stream bytes already written. */
    kp_buf out;               /* encoded requests not yet written */
    struct sl_oref *refs;
    int n_refs, cap_refs;
    size_t ref_bytes;         /* sum of refs[].len */
    size_t out_sent;
    size_t open_frame;        /* sl_req_begin → sl_req_end */
    size_t open_ref_bytes;    /* ref_bytes at sl_req_begin */
    int16_t open_api, open_ver;
    uint8_t rbuf[65536];      /* staging for small frames */
    size_t rlen;
    sl_frame *rx;             /* large frame being read in place */
    size_t rx_got;
    sl_req *wait_head, *wait_tail;
    int n_wait;
    bool fetch_inflight;      /* consumer: one Fetch at a time per broker */
    int apiver_try;           /* ApiVersions version being tried */
    int16_t vmin[SL_API_MAX], vmax[SL_API_MAX];   /* -1: not offered */
};

typedef struct sl_mpart {
    int32_t leader;           /* -1: none */
    int16_t err;
} sl_mpart;

typedef struct sl_mtopic {
    char *name;
    int err;                  /* topic-level error of the last answer */
    int32_t npart;            /* 0 until known */
    sl_mpart *parts;
    bool known;               /* an answer arrived */
    bool internal;            /* IsInternal */
    uint32_t seen_epoch;      /* md_epoch of the last answer naming it */
    int64_t wanted_at;
} sl_mtopic;

/* Deferred work with a waiting application thread (admin, sync commit,
 * committed(), watermarks).  The waiter owns it; on timeout it sets
 * abandoned and whoever completes it later frees it. */
typedef struct sl_op sl_op;
struct sl_op {
    sl_op *next;
    /* Runs on the background thread each loop until it returns nonzero
     * (request sent or op completed). */
    int (*step)(sl_client *cl, sl_op *op, int64_t now);
    void (*free_fn)(sl_op *op);
    bool done, abandoned;
    bool detached;            /* nobody will wait: freed when finished */
    int err;
    char errstr[256];
    int64_t deadline;
    void *arg;                /* op-specific */
};

struct sl_prod;
typedef struct sl_cons sl_cons;
struct sl_grp;

struct sl_client {
    sl_conf conf;
    char name[32];
    pthread_mutex_t lock;
    pthread_cond_t cond;
    pthread_t thread;
    bool thread_started, terminate;
    int wake_fd;
    int32_t next_corrid;
    sl_broker **brokers;
    int n_brokers;
    /* metadata */
    sl_mtopic **topics;
    int n_topics;
    int32_t controller_id;
    bool md_inflight, md_needed;
    int64_t md_next, md_last_ok;
    uint32_t md_epoch;        /* bumped by each metadata answer */
    bool md_all;              /* ask for all topics (regex subscription) */
    uint32_t md_all_epoch;    /* md_epoch of the last all-topics answer */
    /* ops */
    sl_op *ops;
    /* role modules */
    struct sl_prod *prod;
    sl_cons *cons;
    struct sl_grp *grp;
    void *app_handle;         /* the sl_producer / sl_consumer / sl_admin */
    /* Scratch for the generated codec (kp_msgs.h), background thread
     * only: a response callback decodes into it (client.c dispatch resets
     * it after the callback), a tick builds a request's arrays in it and
     * resets it once encoded.  Its newest chunk is kept: no malloc per
     * request in the steady state. */
    kp_arena arena;
    /* Security (client_sec.c): the TLS context (NULL in plaintext), and
     * the handle's fatal login or TLS failure (inv. 1 there). */
    struct ssl_ctx_st *ssl_ctx;
    struct sl_salted *salted;         /* SCRAM: the last SaltedPassword */
    int auth_err;                     /* 0, or SL_E_AUTHENTICATION */
    char auth_msg[512];
};

/* ---- security (client_sec.c) ------------------------------------------ */
int  sl_sec_init(sl_client *cl, char *errbuf, size_t size);   /* at creation */
void sl_sec_free(sl_client *cl);
/* TLS on a connected socket: start, then step until 1 (done); 0 in
 * progress (b->tls_want_write picks the poll events), -1 failed. */
int  sl_sec_tls_start(sl_client *cl, sl_broker *b);
int  sl_sec_tls_step(sl_client *cl, sl_broker *b);
void sl_sec_close(sl_broker *b);
/* recv(2)/sendmsg(2) through TLS: bytes, 0 closed, -1 with errno. */
struct iovec;
long sl_sec_read(sl_client *cl, sl_broker *b, void *p, size_t n);
long sl_sec_writev(sl_client *cl, sl_broker *b, const struct iovec *iov, int n);
/* After ApiVersions: the SASL login, then sl_conn_up(); false without SASL. */
bool sl_sec_sasl_start(sl_client *cl, sl_broker *b);
/* A refused login or TLS handshake: the handle stops (inv. 1). */
void sl_sec_fatal(sl_client *cl, sl_broker *b, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* client.c */
void sl_conn_fail(sl_client *cl, sl_broker *b, int err, const char *why);
void sl_conn_up(sl_client *cl, sl_broker *b);
int64_t sl_now_ms(void);      /* monotonic */
int64_t sl_wall_ms(void);
int64_t sl_coarse_ms(void);   /* monotonic, a few ms coarse, cheaper */
sl_client *sl_client_new(const sl_conf *conf, const char *kind,
                         char *errbuf, size_t errbuf_size);
int  sl_client_start(sl_client *cl, char *errbuf, size_t errbuf_size);
void sl_client_stop(sl_client *cl);   /* joins the thread, fails requests */
void sl_client_free(sl_client *cl);
void sl_wakeup(sl_client *cl);
void sl_log(sl_client *cl, int level, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
void sl_errbuf(char *buf, size_t size, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Broker lookup; the broker is created if unknown (with host/port). */
sl_broker *sl_broker_find(sl_client *cl, int32_t id);
sl_broker *sl_broker_add(sl_client *cl, int32_t id, const char *host, int port);
/* The broker if it is ready for requests, else NULL (and a connection is
 * started).  sl_any_broker: some ready broker, preferring known ones. */
sl_broker *sl_broker_ready(sl_client *cl, int32_t id);
sl_broker *sl_any_broker(sl_client *cl);
/* Highest version both sides support in [lo, hi], or -1. */
int16_t sl_api_version(const sl_broker *b, int16_t api, int16_t lo, int16_t hi);
/* Starts a request on b: writes the size placeholder and header, returns
 * the buffer to write the body into.  sl_req_end finishes it; cb NULL
 * means no response is expected (Produce acks=0). */
kp_buf *sl_req_begin(sl_client *cl, sl_broker *b, int16_t api, int16_t ver);
void sl_req_end(sl_client *cl, sl_broker *b, sl_resp_cb *cb, void *ctx);
/* Between sl_req_begin and sl_req_end: the next len bytes of the request
 * are p[0..len), sent from there without a copy.  The memory must stay
 * unchanged until the request's callback runs (it can't run before the
 * bytes are written; a failed connection drops them first), so it suits
 * requests that expect an answer and large regions (below ~16 KiB a copy
 * costs less than the iovec).  Returns 0, or SL_E_NOMEM having copied. */
int  sl_req_ref(sl_broker *b, const void *p, size_t len);
/* Ops: queue (caller holds the lock) and wait (drops it while waiting). */
void sl_op_submit(sl_client *cl, sl_op *op);
int  sl_op_wait(sl_client *cl, sl_op *op, int timeout_ms, char *errbuf, size_t size);
void sl_op_finish(sl_client *cl, sl_op *op, int err, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* Waits on cl->cond until deadline (monotonic ms, -1 forever); lock held. */
int  sl_cond_wait_until(sl_client *cl, int64_t deadline);
int64_t sl_deadline(int timeout_ms);

/* metadata.c */
sl_mtopic *sl_md_topic(sl_client *cl, const char *name, bool create);
void sl_md_want(sl_client *cl, const char *topic);     /* ask for it soon */
void sl_md_refresh(sl_client *cl);                     /* ask for all soon */
void sl_md_tick(sl_client *cl, int64_t now, int64_t *next);
/* Waits (lock held) until the topic's metadata is known or deadline. */
int  sl_md_wait_topic(sl_client *cl, const char *topic, int64_t deadline,
                      sl_mtopic **out);
int32_t sl_md_leader(sl_client *cl, const char *topic, int32_t partition);

/* producer.c / consumer.c / group.c: hooks the background thread calls
 * with the lock held. */
void sl_prod_tick(sl_client *cl, int64_t now, int64_t *next);
void sl_prod_on_destroy(sl_client *cl);
void sl_cons_tick(sl_client *cl, int64_t now, int64_t *next);
void sl_grp_tick(sl_client *cl, int64_t now, int64_t *next);

/* consumer.c ↔ group.c */
typedef struct sl_tp {
    char *topic;
    int32_t partition;
    int64_t offset;
} sl_tp;
void sl_cons_set_assignment(sl_client *cl, const sl_tp *tps, int n, bool from_group);
int  sl_cons_snapshot_positions(sl_client *cl, sl_tp **out);
void sl_cons_set_committed(sl_client *cl, const char *topic, int32_t partition,
                           int64_t offset);
/* consumer.c ↔ consumer_api.c: ListOffsets v1-2 for one partition (timestamp
 * -2 earliest, -1 latest).  _read takes the answer's last ErrorCode and
 * Offset into *ec and *off (left alone when it has none): 0 or SL_E_BAD_MSG. */
void sl_list_offsets_send(sl_client *cl, sl_broker *b, int16_t v, const char *topic,
                          int32_t partition, int64_t timestamp, sl_resp_cb *cb,
                          void *ctx);
int  sl_list_offsets_read(sl_client *cl, kp_rd *r, int16_t ver, int16_t *ec,
                          int64_t *off);
/* group_offsets.c ↔ admin.c: walks an OffsetFetch v1-5 answer, calling
 * each() per partition with its committed Offset (-1: none) and
 * ErrorCode.  Returns the top-level ErrorCode (v2+; else 0) or
 * SL_E_BAD_MSG. */
typedef void sl_offset_fetch_each(void *ctx, kp_str topic, int32_t partition,
                                  int64_t offset, int16_t ec);
int sl_offset_fetch_read(kp_rd *r, int16_t ver, sl_offset_fetch_each *each, void *ctx);
/* group.c ↔ admin.c: FindCoordinator v0-2 for a group.  _req encodes the
 * request body into w; _read decodes an answer and, when it names a
 * coordinator, adds that broker and sets *node.  Returns its ErrorCode,
 * or -1 (malformed, or an unusable host). */
void sl_find_coordinator_req(kp_buf *w, int16_t v, const char *group_id);
int  sl_find_coordinator_read(sl_client *cl, kp_rd *r, int16_t ver, int32_t *node);
/* group_offsets.c: OffsetCommit/OffsetFetch ops used by the consumer API. */
int sl_grp_commit(sl_client *cl, sl_tp *tps, int n, bool wait,
                  sl_topic_partition *results, char *errbuf, size_t size);
int sl_grp_fetch_offsets(sl_client *cl, sl_tp *tps, int n, int timeout_ms,
                         char *errbuf, size_t size);
/* Runs rebalance/commit callbacks; lock held, dropped around callbacks. */
void sl_grp_serve_events(sl_client *cl, sl_consumer *c);
bool sl_grp_has_events(sl_client *cl);
/* The member left the group for max.poll.interval.ms: fills m with
 * SL_E_MAX_POLL_EXCEEDED, starts the rejoin, returns true.  Lock held. */
bool sl_grp_poll_error(sl_client *cl, sl_message *m);
int  sl_grp_subscribe(sl_client *cl, const char *const *topics, int n);
int  sl_grp_close(sl_client *cl, int timeout_ms);   /* INT_MAX: close's own bounds */
void sl_grp_free(sl_client *cl);
int32_t sl_grp_coordinator(sl_client *cl);       /* -1 if unknown */

/* Small helpers */
char *sl_strdup(const char *s);
char *sl_strndup(const char *s, size_t n);
int  sl_retriable(int err);

#endif
