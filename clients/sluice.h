/*
 * sluice.h — libsluice, the C client library for Sluice and any Kafka broker.
 *
 * One header, three handle types:
 *
 *   sl_producer  asynchronous produce with delivery reports, batching
 *                (linger.ms / batch.size), compression, the Java client's
 *                murmur2 partitioner, retries, idempotence.
 *   sl_consumer  manual assign() or subscribe() in a consumer group,
 *                poll() with background prefetching, commits, seek.
 *   sl_admin     topics, configs, groups and their offsets (synchronous).
 *
 * Model.  Every handle owns one background thread that does all network
 * I/O (non-blocking sockets, poll(2)); application threads talk to it
 * through queues inside the handle.  There is no global state: two handles
 * share nothing.  Callbacks (delivery reports, rebalances, async commits)
 * are only ever run on an application thread, from inside sl_poll(),
 * sl_flush() or sl_consumer_poll() — never on the background thread.
 *
 * Errors.  Functions return an int: 0 for success, a positive Kafka
 * protocol error code (the numbers of Kafka's protocol guide; the common
 * ones are SL_ERR_* below), or a negative library code (SL_E_*).
 * sl_err_name() names any of them.  Where an error has more to say, the
 * function takes a (char *errbuf, size_t errbuf_size) pair that receives a
 * NUL-terminated message naming what failed (errbuf may be NULL).
 *
 * Thread-safety is stated on each function.  "Any thread" means the call
 * may be made concurrently from several threads on the same handle.
 *
 * Configuration uses Kafka's property names; sl_conf_set() rejects an
 * unknown key or a bad value with a message naming it.  The full list is
 * in the comment above sl_conf_set().
 */
#ifndef SLUICE_H
#define SLUICE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* 1.0.0, soname libsluice.so.1: sl_header gained key_len (in what was
 * padding), so a binary built against 0.x would pass garbage there. */
#define SL_VERSION_STR "1.0.0"
const char *sl_version(void);

/* ---- errors ------------------------------------------------------------- */
/* Kafka protocol codes (positive; full list in Kafka's protocol guide). */
enum {
    SL_OK = 0,
    SL_ERR_UNKNOWN_SERVER_ERROR = -1,          /* the protocol's -1 */
    SL_ERR_OFFSET_OUT_OF_RANGE = 1,
    SL_ERR_CORRUPT_MESSAGE = 2,
    SL_ERR_UNKNOWN_TOPIC_OR_PARTITION = 3,
    SL_ERR_LEADER_NOT_AVAILABLE = 5,
    SL_ERR_NOT_LEADER_OR_FOLLOWER = 6,
    SL_ERR_REQUEST_TIMED_OUT = 7,
    SL_ERR_MESSAGE_TOO_LARGE = 10,
    SL_ERR_COORDINATOR_NOT_AVAILABLE = 15,
    SL_ERR_NOT_COORDINATOR = 16,
    SL_ERR_INVALID_TOPIC_EXCEPTION = 17,
    SL_ERR_ILLEGAL_GENERATION = 22,
    SL_ERR_UNKNOWN_MEMBER_ID = 25,
    SL_ERR_REBALANCE_IN_PROGRESS = 27,
    SL_ERR_UNSUPPORTED_VERSION = 35,
    SL_ERR_TOPIC_ALREADY_EXISTS = 36,
    SL_ERR_INVALID_PARTITIONS = 37,
    SL_ERR_INVALID_CONFIG = 40,
    SL_ERR_OUT_OF_ORDER_SEQUENCE_NUMBER = 45,
    SL_ERR_DUPLICATE_SEQUENCE_NUMBER = 46,
    SL_ERR_GROUP_ID_NOT_FOUND = 69,
};
/* Library codes (negative, never on the wire). */
enum {
    SL_E_INVALID_ARG   = -200,   /* bad argument to a function */
    SL_E_TIMED_OUT     = -201,   /* the call's timeout expired */
    SL_E_QUEUE_FULL    = -202,   /* buffer.memory is used up: sl_poll() and retry */
    SL_E_NOMEM         = -203,
    SL_E_TRANSPORT     = -204,   /* connection failed or was lost */
    SL_E_MSG_TIMED_OUT = -205,   /* not delivered within delivery.timeout.ms */
    SL_E_NO_OFFSET     = -206,   /* no committed offset and auto.offset.reset=none */
    SL_E_PARTITION_EOF = -207,   /* consumer reached the end (enable.partition.eof) */
    SL_E_STATE         = -208,   /* call not valid in the handle's state */
    SL_E_UNSUPPORTED   = -209,   /* the broker lacks the API or version needed */
    SL_E_CONF          = -210,   /* unknown configuration key or bad value */
    SL_E_DESTROYED     = -211,   /* handle destroyed before the operation completed */
    SL_E_BAD_MSG       = -212,   /* malformed data from the broker */
    SL_E_FATAL         = -213,   /* the idempotent producer lost its guarantee */
    SL_E_MAX_POLL_EXCEEDED = -214, /* the application did not poll within
                                      max.poll.interval.ms: left the group */
    SL_E_AUTHENTICATION = -215,   /* the broker refused the SASL login, or the
                                     TLS handshake failed (certificate, host
                                     name): fatal for the handle, see
                                     security.protocol */
};
/* "NOT_LEADER_OR_FOLLOWER", "TIMED_OUT", …  Any thread; never NULL. */
const char *sl_err_name(int err);

/* ---- configuration ---------------------------------------------------- */
typedef struct sl_conf sl_conf;
typedef struct sl_producer sl_producer;
typedef struct sl_consumer sl_consumer;
typedef struct sl_admin sl_admin;

/* A configuration object: create, set, then hand to a handle constructor,
 * which copies it (the caller still destroys it).  Not thread-safe: one
 * thread at a time per sl_conf. */
sl_conf *sl_conf_new(void);
sl_conf *sl_conf_dup(const sl_conf *conf);
void sl_conf_destroy(sl_conf *conf);

/*
 * Sets a property.  Returns 0 or SL_E_CONF with a message naming the key
 * (and the value) in errbuf.  Keys (default):
 *
 *  all handles
 *   bootstrap.servers        host:port[,host:port…] (required)
 *   client.id                string ("sluice")
 *   request.timeout.ms       1..    (30000)
 *   retry.backoff.ms         0..    (100)
 *   reconnect.backoff.ms     0..    (100)
 *   reconnect.backoff.max.ms 0..    (10000)
 *   metadata.max.age.ms      1..    (300000)
 *   log_level                0..7   (6); messages go to stderr or the log callback
 *   socket.send.buffer.bytes 0..    (0: the system's default) SO_SNDBUF
 *  security (librdkafka's names and behaviour)
 *   security.protocol        PLAINTEXT|SSL|SASL_PLAINTEXT|SASL_SSL (PLAINTEXT)
 *   sasl.mechanism           PLAIN|SCRAM-SHA-256|SCRAM-SHA-512 (PLAIN);
 *                            sasl.mechanisms is an alias.  Each connection
 *                            logs in (SaslHandshake v1, SaslAuthenticate
 *                            v1+) before any other request
 *   sasl.username, sasl.password  required with SASL_*
 *   ssl.ca.location          PEM file of the CAs to trust (unset: the system's)
 *   ssl.certificate.location, ssl.key.location  a client certificate (PEM,
 *                            chain first) and its key; ssl.key.password if
 *                            the key is encrypted
 *   ssl.endpoint.identification.algorithm  https|none (https): the broker's
 *                            certificate must name the host (or IP) the
 *                            client connects to
 *                            A file that cannot be read fails the handle's
 *                            creation (naming the setting).  A refused login
 *                            or TLS handshake (untrusted certificate, wrong
 *                            name) is logged once with the broker's message
 *                            and ends the handle: no reconnection, and every
 *                            call (and sl_consumer_poll, as an error message)
 *                            returns SL_E_AUTHENTICATION
 *  producer
 *   acks                     all|-1|0|1 (all)
 *   linger.ms                0..    (5) a batch goes out this long after its
 *                            first record, or once batch.size is reached; while
 *                            its partition has max.in.flight requests out (or
 *                            batches waiting) it keeps filling instead
 *   batch.size               1..    (1000000) bytes of records per partition batch
 *   compression.type         none|gzip|snappy|lz4|zstd (none)
 *   compression.codec        alias of compression.type
 *   enable.idempotence       true|false (true): InitProducerId + sequences,
 *                            so retries never duplicate or reorder.  A broker
 *                            without InitProducerId is used non-idempotently
 *                            (one log line) — see sl_producer_idempotent().
 *   retries                  0..    (2147483647)
 *   delivery.timeout.ms      1..    (120000); message.timeout.ms is an alias
 *   max.in.flight.requests.per.connection 1..5 (5) Produce requests
 *                            in flight per partition (librdkafka counts per
 *                            connection, default 1000000; with one partition
 *                            per broker the two agree)
 *   buffer.memory            bytes  (268435456) queued, undelivered record bytes
 *   max.block.ms             0..    (60000) sl_produce waits this long for
 *                            a topic's metadata
 *   partitioner              murmur2_random|murmur2|consistent_random|random
 *                            (murmur2_random: Java's; null keys sticky)
 *  consumer
 *   group.id                 string (none: only assign() is possible)
 *   auto.offset.reset        earliest|latest|none (latest); smallest,
 *                            beginning, largest, end are accepted aliases
 *   enable.auto.commit       true|false (true): commit poll positions every
 *                            auto.commit.interval.ms, before a rebalance and on
 *                            close — subscribed, or with assign() when
 *                            group.id is set (as librdkafka does)
 *   auto.commit.interval.ms  0..    (5000)
 *   session.timeout.ms       1..    (45000)
 *   heartbeat.interval.ms    1..    (3000)
 *   max.poll.interval.ms     1..    (300000) longest time between
 *                            sl_consumer_poll calls while subscribed (waiting
 *                            inside poll counts as polling; rebalance
 *                            callbacks do not).  Past it the member leaves the
 *                            group and the next poll returns
 *                            SL_E_MAX_POLL_EXCEEDED, then rejoins.  Also
 *                            JoinGroup's rebalance timeout.
 *   partition.assignment.strategy  list of range,roundrobin (range,roundrobin)
 *   fetch.min.bytes          1..    (1)
 *   fetch.max.bytes          1..    (52428800)
 *   max.partition.fetch.bytes 1..   (1048576)
 *   fetch.max.wait.ms        0..    (500)
 *   queued.max.messages.kbytes 1..  (65536) prefetch bound per consumer
 *   enable.partition.eof     true|false (false)
 *   allow.auto.create.topics true|false (false)
 *   isolation.level          read_uncommitted|read_committed (read_uncommitted):
 *                            read_committed fetches up to the last stable
 *                            offset and drops the records of aborted
 *                            transactions; watermarks' high is then the LSO
 */
int sl_conf_set(sl_conf *conf, const char *key, const char *value,
                char *errbuf, size_t errbuf_size);
/* Current value as text (defaults included).  0, or SL_E_CONF for an
 * unknown key. */
int sl_conf_get(const sl_conf *conf, const char *key, char *buf, size_t size);

/* Opaque passed to every callback below. */
void sl_conf_set_opaque(sl_conf *conf, void *opaque);
/* Log lines (level 0-7 as syslog) instead of stderr.  Called on the
 * background thread: keep it short and thread-safe. */
void sl_conf_set_log_cb(sl_conf *conf,
                        void (*log_cb)(int level, const char *msg, void *opaque));

/* ---- messages and headers ----------------------------------------------- */
/* Zero-initialize every sl_header you pass (= {0}, memset, or a designated
 * initializer): a key_len left uninitialized is read as the key's length. */
typedef struct sl_header {
    const char *key;          /* key_len bytes; NUL-terminated when key_len is 0 */
    const void *value;        /* NULL = null value */
    int32_t value_len;
    int32_t key_len;          /* 0: strlen(key), so sources that set only key and
                                 value work; a key holding a NUL byte needs it.
                                 Consumed headers set it (and still end the key
                                 with a NUL) */
} sl_header;
/* A header's key length: key_len, or strlen(key) when key_len is 0. */
size_t sl_header_key_len(const sl_header *h);

#define SL_TIMESTAMP_CREATE_TIME     0
#define SL_TIMESTAMP_LOG_APPEND_TIME 1

/* A consumed message (or a consumer error event when err != 0).  Every
 * pointer stays valid until the next sl_consumer_poll() or
 * sl_consumer_destroy() on the same consumer. */
typedef struct sl_message {
    int err;                  /* 0, or an error event for topic/partition */
    const char *errstr;       /* message for err, else NULL */
    const char *topic;
    int32_t partition;
    int64_t offset;
    int64_t timestamp;        /* ms since the epoch */
    int timestamp_type;       /* SL_TIMESTAMP_* */
    const void *key;          /* NULL = null key */
    int32_t key_len;
    const void *value;        /* NULL = null value (tombstone) */
    int32_t value_len;
    const sl_header *headers;
    int header_count;
} sl_message;

/* Partition "any": let the partitioner choose. */
#define SL_PARTITION_ANY ((int32_t)-1)

/* Special offsets for assign/seek/committed. */
#define SL_OFFSET_BEGINNING ((int64_t)-2)
#define SL_OFFSET_END       ((int64_t)-1)
#define SL_OFFSET_STORED    ((int64_t)-1000)   /* committed, else auto.offset.reset */
#define SL_OFFSET_INVALID   ((int64_t)-1001)   /* "none" in results */

typedef struct sl_topic_partition {
    const char *topic;
    int32_t partition;
    int64_t offset;
    int err;                  /* per-partition result, 0 = ok */
} sl_topic_partition;

/* ---- producer ------------------------------------------------------------- */
typedef struct sl_delivery {
    int err;                  /* 0 = written; else why not */
    const char *errstr;       /* NULL when err == 0 */
    const char *topic;
    int32_t partition;
    int64_t offset;           /* assigned offset, -1 on error or acks=0 */
    void *msg_opaque;         /* as given to sl_produce() */
} sl_delivery;

/* Delivery reports, one per sl_produce()d message, served from sl_poll()
 * and sl_flush() on the calling thread. */
void sl_conf_set_delivery_cb(sl_conf *conf,
                             void (*dr_cb)(const sl_delivery *d, void *opaque));

/* Creates a producer (copies conf).  NULL with a message in errbuf when
 * the configuration is incomplete or inconsistent.  Any thread. */
sl_producer *sl_producer_new(const sl_conf *conf, char *errbuf, size_t errbuf_size);

/*
 * Queues one record.  Copies topic, key, value and headers into the
 * partition's open batch (no allocation per message).  key == NULL: null
 * key; value == NULL: null value.  partition SL_PARTITION_ANY lets the
 * partitioner pick.  timestamp 0 = now.  msg_opaque comes back in the
 * delivery report.
 * Returns 0; SL_E_QUEUE_FULL (buffer.memory used up: call sl_poll() and
 * try again); SL_ERR_UNKNOWN_TOPIC_OR_PARTITION (topic does not exist and
 * was not auto-created, or partition out of range); SL_E_TIMED_OUT (no
 * metadata for the topic within max.block.ms); SL_ERR_MESSAGE_TOO_LARGE;
 * SL_E_FATAL once the idempotent producer failed; SL_E_INVALID_ARG.
 * Any thread.
 */
int sl_produce(sl_producer *p, const char *topic, int32_t partition,
               const void *key, size_t key_len,
               const void *value, size_t value_len,
               const sl_header *headers, int header_count,
               int64_t timestamp, void *msg_opaque);

/* Serves delivery reports waiting for up to timeout_ms (0: don't wait,
 * -1: forever) for the first.  Returns the number of reports served.
 * Any thread (reports are handed to one caller each). */
int sl_poll(sl_producer *p, int timeout_ms);

/* Sends everything queued now (ignoring linger.ms) and serves delivery
 * reports until none is outstanding.  0, or SL_E_TIMED_OUT with messages
 * still outstanding.  Any thread. */
int sl_flush(sl_producer *p, int timeout_ms);

/* Messages queued or in flight, delivery reports not yet served. */
int sl_outq_len(sl_producer *p);

/* 1 if the producer is running idempotently (broker granted a producer
 * id), 0 if not (disabled, or not yet known, or the broker lacks
 * InitProducerId).  Any thread. */
int sl_producer_idempotent(sl_producer *p);

/* Partition count of a topic, fetching metadata if needed.  Returns the
 * count (> 0) or an error code.  Any thread. */
int sl_producer_partition_count(sl_producer *p, const char *topic, int timeout_ms);

/* Stops the background thread and frees everything.  Messages not yet
 * delivered are dropped without reports: call sl_flush() first.  No other
 * call on p may be running or follow. */
void sl_producer_destroy(sl_producer *p);

/* ---- consumer ------------------------------------------------------------ */
#define SL_REBALANCE_ASSIGN 1
#define SL_REBALANCE_REVOKE 2

/* Group rebalances: REVOKE with the partitions given up (before the
 * group rejoins; commit here if auto commit is off), ASSIGN with the new
 * ones (fetching starts from the committed offset, else auto.offset.reset).
 * Called from sl_consumer_poll().  The library applies the assignment
 * itself; the callback may call sl_consumer_seek() on assigned partitions
 * and sl_consumer_commit().  Heartbeats continue while it runs; its time
 * counts against max.poll.interval.ms. */
void sl_conf_set_rebalance_cb(sl_conf *conf,
                              void (*cb)(sl_consumer *c, int event,
                                         const sl_topic_partition *parts, int count,
                                         void *opaque));
/* Result of an async commit, called from sl_consumer_poll(). */
void sl_conf_set_commit_cb(sl_conf *conf,
                           void (*cb)(sl_consumer *c, int err,
                                      const sl_topic_partition *parts, int count,
                                      void *opaque));

/* Creates a consumer (copies conf).  Any thread. */
sl_consumer *sl_consumer_new(const sl_conf *conf, char *errbuf, size_t errbuf_size);

/* Joins group.id for these topics (replacing a previous subscription).
 * A name starting with "^" is a POSIX extended regex matched against all
 * the cluster's topics (internal ones excepted), again at every metadata
 * refresh (metadata.max.age.ms), so topics created later join the
 * subscription; SL_E_INVALID_ARG for a bad regex (logged).  SL_E_STATE
 * without group.id or while a manual assignment exists.  Application
 * thread (the one that polls). */
int sl_consumer_subscribe(sl_consumer *c, const char *const *topics, int count);
/* Leaves the group (revoking the assignment first). */
int sl_consumer_unsubscribe(sl_consumer *c);

/* Manual assignment, replacing the previous one; count 0 clears it.  Each
 * offset is absolute or SL_OFFSET_BEGINNING / END / STORED.  SL_E_STATE
 * while subscribed.  Application thread. */
int sl_consumer_assign(sl_consumer *c, const sl_topic_partition *parts, int count);

/* Waits up to timeout_ms (-1 forever) for a message.  Returns 1 with *msg
 * filled (msg->err != 0 is a per-partition event such as
 * SL_E_PARTITION_EOF or SL_ERR_OFFSET_OUT_OF_RANGE with
 * auto.offset.reset=none, or SL_E_MAX_POLL_EXCEEDED with topic NULL),
 * 0 on timeout, or a negative code.  Also runs
 * the rebalance and commit callbacks.  One thread at a time per consumer. */
int sl_consumer_poll(sl_consumer *c, int timeout_ms, sl_message *msg);

/* Next fetch position: the offset after the last message returned by
 * poll, or the seek target.  0, SL_ERR_UNKNOWN_TOPIC_OR_PARTITION when
 * not assigned, or SL_OFFSET_INVALID in *offset before the first fetch
 * position is known.  Any thread. */
int sl_consumer_position(sl_consumer *c, const char *topic, int32_t partition,
                         int64_t *offset);

/* Moves the fetch position of an assigned partition (absolute offset or
 * SL_OFFSET_BEGINNING / END); messages prefetched for it are dropped.
 * Any thread. */
int sl_consumer_seek(sl_consumer *c, const char *topic, int32_t partition,
                     int64_t offset);

/* Commits offsets (the next offset to read, Kafka's convention).  parts
 * NULL: the current positions of all assigned partitions.  async 0 waits
 * (up to request.timeout.ms) and returns the result, with per-partition
 * errors in parts[i].err; async 1 returns at once and reports through the
 * commit callback.  Requires group.id.  Application thread. */
int sl_consumer_commit(sl_consumer *c, sl_topic_partition *parts, int count,
                       int async);

/* Fills parts[i].offset with the group's committed offset
 * (SL_OFFSET_INVALID if none) and parts[i].err.  Any thread. */
int sl_consumer_committed(sl_consumer *c, sl_topic_partition *parts, int count,
                          int timeout_ms);

/* The current assignment, as a malloc'ed array (topics point into it):
 * free with free().  Returns the count or a negative code. */
int sl_consumer_assignment(sl_consumer *c, sl_topic_partition **parts);

/* Earliest and latest offsets of a partition, asked of its leader. */
int sl_consumer_watermarks(sl_consumer *c, const char *topic, int32_t partition,
                           int64_t *low, int64_t *high, int timeout_ms);

/* The first offset whose timestamp is >= timestamp_ms (ListOffsets v1+);
 * *offset is -1 when there is none (past the end).  Any thread. */
int sl_consumer_offset_for_time(sl_consumer *c, const char *topic, int32_t partition,
                                int64_t timestamp_ms, int64_t *offset, int timeout_ms);

/* Partition count of a topic (fetching metadata if needed), or an error
 * code.  Any thread. */
int sl_consumer_partition_count(sl_consumer *c, const char *topic, int timeout_ms);

/* Commits (with enable.auto.commit), leaves the group, stops fetching.
 * Idempotent.  Application thread. */
int sl_consumer_close(sl_consumer *c);
/* The same, but waits at most timeout_ms for commits still out and for
 * the LeaveGroup answer (close waits request.timeout.ms for commits, 5 s
 * to leave): for a caller giving up after a failure, whose coordinator
 * may be gone.  0: sends what it would send, waits for nothing. */
int sl_consumer_close_within(sl_consumer *c, int timeout_ms);
/* Closes if needed and frees.  No other call may be running or follow. */
void sl_consumer_destroy(sl_consumer *c);

/* ---- admin --------------------------------------------------------------- */
/* All admin calls are synchronous, bounded by timeout_ms, and may be made
 * from any thread.  Result arrays are malloc'ed: free them with the
 * matching *_free function. */
sl_admin *sl_admin_new(const sl_conf *conf, char *errbuf, size_t errbuf_size);
void sl_admin_destroy(sl_admin *a);

/* configs: NULL or a NULL-terminated list "key", "value", "key", "value", …
 * replication_factor -1: broker default. */
int sl_admin_create_topic(sl_admin *a, const char *topic, int32_t partitions,
                          int16_t replication_factor, const char *const *configs,
                          int timeout_ms, char *errbuf, size_t errbuf_size);
int sl_admin_delete_topic(sl_admin *a, const char *topic, int timeout_ms,
                          char *errbuf, size_t errbuf_size);

typedef struct sl_config_entry {
    char *name;
    char *value;              /* NULL: no value / sensitive */
    int read_only;
    int is_default;
    int is_sensitive;
} sl_config_entry;
/* resource_type: 2 = topic, 4 = broker (name = the broker id as text). */
int sl_admin_describe_configs(sl_admin *a, int resource_type, const char *name,
                              sl_config_entry **entries, int *count,
                              int timeout_ms, char *errbuf, size_t errbuf_size);
void sl_config_entries_free(sl_config_entry *entries, int count);
/* AlterConfigs (non-incremental: keys not listed return to defaults). */
int sl_admin_alter_configs(sl_admin *a, int resource_type, const char *name,
                           const char *const *configs,
                           int timeout_ms, char *errbuf, size_t errbuf_size);

/* Names of all consumer groups (all brokers asked). */
int sl_admin_list_groups(sl_admin *a, char ***groups, int *count,
                         int timeout_ms, char *errbuf, size_t errbuf_size);
void sl_admin_groups_free(char **groups, int count);
/* Names of all topics (one Metadata request with a null topic list),
 * internal ones (__consumer_offsets, __transaction_state) left out; in the
 * broker's order.  Free with sl_admin_groups_free(). */
int sl_admin_list_topics(sl_admin *a, char ***topics, int *count,
                         int timeout_ms, char *errbuf, size_t errbuf_size);
/* A group's committed offsets (all partitions it has committed). */
int sl_admin_list_group_offsets(sl_admin *a, const char *group,
                                sl_topic_partition **parts, int *count,
                                int timeout_ms, char *errbuf, size_t errbuf_size);
void sl_topic_partitions_free(sl_topic_partition *parts, int count);
/* Partition count of a topic (SL_ERR_UNKNOWN_TOPIC_OR_PARTITION if none). */
int sl_admin_partition_count(sl_admin *a, const char *topic, int timeout_ms);

#ifdef __cplusplus
}
#endif
#endif
