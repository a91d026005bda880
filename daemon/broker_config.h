/*
 * Broker configuration: a Java-style properties file with Kafka's broker
 * key names, plus --override key=value.  Every key is known here; an
 * unknown key or a bad value stops startup with a message naming it.
 *
 * Topic-level defaults given under their broker names (log.retention.hours,
 * log.segment.bytes, log.flush.interval.ms, …) are collected, translated to
 * topic-level names, into topic_defaults: metadata/ resolves a topic's
 * effective config from them (source "broker").
 *
 * The keys are listed once, in daemon/broker_config.c's table (bk_config_keys):
 * name, type, parse target, range, Kafka's default, sensitivity and a
 * line of documentation.  The parser, bk_config_init's defaults and the
 * BROKER resource of DescribeConfigs (daemon/api/api_configs.c) all read that
 * table; topic defaults under broker keys come from metadata/'s table
 * (md_config_defs, broker_key).  Together the two are every key the parser
 * accepts.
 */
#ifndef SLUICE_CONFIG_H
#define SLUICE_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "metadata/md.h"

/* A listener's security protocol (Kafka's SecurityProtocol): a value of the
 * configuration (listeners, security.inter.broker.protocol, the listener
 * map), whose meaning for a connection daemon/security/sec_peer.h tells. */
typedef enum bk_secproto {
    BK_SEC_PLAINTEXT = 0,
    BK_SEC_SSL,
    BK_SEC_SASL_PLAINTEXT,
    BK_SEC_SASL_SSL,
} bk_secproto;

/* "PLAINTEXT", "SSL", ... → 0 and *out; -1 for anything else. */
int bk_secproto_parse(const char *name, bk_secproto *out);
const char *bk_secproto_name(bk_secproto p);
/* True for SASL_PLAINTEXT and SASL_SSL: requests other than ApiVersions,
 * SaslHandshake and SaslAuthenticate wait for authentication. */
bool bk_secproto_is_sasl(bk_secproto p);

#define BK_JAAS_VALUE_MAX 256        /* a JAAS user name or password, with its NUL */

/* One user_<name>="<password>" option of a PlainLoginModule line. */
typedef struct bk_plain_user {
    char name[BK_JAAS_VALUE_MAX];
    char password[BK_JAAS_VALUE_MAX];
} bk_plain_user;
typedef struct bk_plain_users {
    bk_plain_user *v;
    int n;
} bk_plain_users;

/* One named listener of listeners= (Kafka's NAME://host:port); its
 * security protocol is the name's in listener.security.protocol.map, or
 * the name itself when it is one of Kafka's four. */
#define BK_LISTENERS_MAX 8
#define BK_LISTENER_NAME_MAX 64
typedef struct bk_listener {
    char name[BK_LISTENER_NAME_MAX];      /* "PLAINTEXT", "INTERNAL", ... */
    bk_secproto proto;
    char host[256];                       /* "" or 0.0.0.0: all addresses */
    int  port;
    char adv_host[256];                   /* advertised.listeners' entry of */
    int  adv_port;                        /* the same name, else host/port */
} bk_listener;

typedef struct bk_config {
    int32_t broker_id;                    /* broker.id */
    /* listeners= as given, and parsed (bk_config_finish resolves names
     * through the protocol map and joins advertised.listeners). */
    char listeners_text[1024];
    char advertised_text[1024];           /* advertised.listeners as given */
    char protocol_map[1024];              /* listener.security.protocol.map */
    char inter_broker_listener_name[BK_LISTENER_NAME_MAX]; /* inter.broker.listener.name */
    char security_inter_broker_protocol[32];               /* security.inter.broker.protocol */
    bk_listener listeners[BK_LISTENERS_MAX];
    int  nlisteners;
    int  inter_broker_listener;           /* index into listeners (finish) */
    /* The first listener (what code from before named listeners reads). */
    char listen_host[256];
    int  listen_port;
    bk_secproto listen_proto;
    char advertised_host[256];            /* the first listener's advertised */
    int  advertised_port;
    /* TLS (daemon/security/sec_tls.c): PEM files or Kafka's inline PEM forms */
    char ssl_keystore_type[16];           /* ssl.keystore.type: PEM */
    char ssl_keystore_location[1024];     /* ssl.keystore.location: chain + key */
    char ssl_keystore_certificate_chain[16384]; /* ssl.keystore.certificate.chain */
    char ssl_keystore_key[16384];         /* ssl.keystore.key */
    char ssl_key_password[256];           /* ssl.key.password */
    /* the password encoder (daemon/security/sec_pwenc.c): cluster links'
     * secrets at rest; the same on every broker of a cluster */
    char password_encoder_secret[256];            /* password.encoder.secret */
    char password_encoder_old_secret[256];        /* password.encoder.old.secret */
    char password_encoder_keyfactory_algorithm[64]; /* .keyfactory.algorithm */
    char password_encoder_cipher_algorithm[64];   /* password.encoder.cipher.algorithm */
    int32_t password_encoder_key_length;          /* password.encoder.key.length */
    int32_t password_encoder_iterations;          /* password.encoder.iterations */
    char ssl_truststore_type[16];         /* ssl.truststore.type: PEM */
    char ssl_truststore_location[1024];   /* ssl.truststore.location: CA file */
    char ssl_truststore_certificates[16384]; /* ssl.truststore.certificates */
    char ssl_client_auth[16];             /* ssl.client.auth: none|requested|required */
    char ssl_enabled_protocols[64];       /* ssl.enabled.protocols */
    char ssl_endpoint_identification_algorithm[16]; /* for broker-to-broker */
    int64_t ssl_handshake_timeout_ms;     /* sluice: a handshake longer closes */
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
    /* SASL (daemon/security/sec_sasl.c) */
    char sasl_enabled_mechanisms[256];    /* sasl.enabled.mechanisms */
    /* listener.name.<listener>.sasl.enabled.mechanisms (Kafka's per-listener
     * override; listener upper case): read through bk_config_sasl_mechanisms. */
    struct bk_listener_mechs {
        char listener[BK_LISTENER_NAME_MAX];
        char value[256];
    } lmechs[BK_LISTENERS_MAX];
    int nlmechs;
    int64_t connections_max_reauth_ms;    /* connections.max.reauth.ms (0: never) */
    /* The broker's own SASL login on a SASL inter-broker listener (the
     * replica fetchers, repl_fetcher.c): the mechanism, and Kafka's JAAS line,
     * global or per listener and mechanism
     * (listener.name.<listener>.<mechanism>.sasl.jaas.config).
     * bk_config_finish picks the one for the inter-broker listener and
     * parses it into ib_sasl_user / ib_sasl_password, and each SASL
     * listener's PLAIN line's user_<name> options into plain_users. */
    char sasl_mechanism_inter_broker_protocol[32];
    char sasl_jaas_config[2048];          /* sasl.jaas.config */
    struct bk_jaas_entry {
        char listener[BK_LISTENER_NAME_MAX];      /* upper case */
        char mechanism[32];                       /* upper case */
        char value[2048];
    } jaas[BK_LISTENERS_MAX * 3];
    int njaas;
    char ib_sasl_user[256], ib_sasl_password[256];  /* finish: "" when not SASL */
    /* Each SASL listener's PLAIN users, by listener index: the
     * user_<name>="<password>" options of its PlainLoginModule line
     * (bk_config_plain_users; read by sec_sasl.c).  Heap, freed and cleansed by
     * bk_config_free; n == 0 when the line has none. */
    bk_plain_users plain_users[BK_LISTENERS_MAX];
    int64_t log_retention_check_interval_ms;
    /* log cleaner (daemon/replica/replica_cleaner.c) */
    bool    log_cleaner_enable;                   /* log.cleaner.enable */
    int32_t log_cleaner_threads;                  /* log.cleaner.threads */
    int64_t log_cleaner_dedupe_buffer_size;       /* log.cleaner.dedupe.buffer.size */
    double  log_cleaner_io_max_bytes_per_second;  /* log.cleaner.io.max.bytes.per.second */
    int64_t log_cleaner_backoff_ms;               /* log.cleaner.backoff.ms */
    int64_t log_flush_scheduler_interval_ms;
    int64_t log_flush_offset_checkpoint_interval_ms;
    int32_t fetch_max_bytes;              /* fetch.max.bytes (broker cap) */
    /* replication (followers fetch from leaders) */
    int32_t replica_fetch_max_bytes;          /* replica.fetch.max.bytes, per partition */
    /* the reassignment throttles, bytes/s (daemon/view/view_broker_configs.h
     * view_broker_config_rate: a dynamic value wins) */
    int64_t leader_replication_throttled_rate, follower_replication_throttled_rate;
    int32_t replica_fetch_response_max_bytes; /* replica.fetch.response.max.bytes */
    int32_t replica_fetch_wait_max_ms;        /* replica.fetch.wait.max.ms */
    int32_t replica_fetch_min_bytes;          /* replica.fetch.min.bytes */
    int32_t replica_fetch_backoff_ms;         /* replica.fetch.backoff.ms */
    int32_t num_replica_fetchers;             /* num.replica.fetchers */
    int64_t replica_lag_time_max_ms;          /* replica.lag.time.max.ms */
    bool controlled_shutdown_enable;          /* controlled.shutdown.enable */
    int32_t controlled_shutdown_max_retries;  /* controlled.shutdown.max.retries */
    int64_t controlled_shutdown_retry_backoff_ms; /* controlled.shutdown.retry.backoff.ms */
    bool auto_leader_rebalance_enable;        /* auto.leader.rebalance.enable */
    int64_t leader_imbalance_check_interval_seconds; /* leader.imbalance.check.interval.seconds */
    int32_t leader_imbalance_per_broker_percentage;  /* leader.imbalance.per.broker.percentage */
    int64_t leader_recovery_wait_ms;          /* leader.recovery.wait.ms */
    char zookeeper_connect[1024];         /* zookeeper.connect ("" = standalone) */
    int32_t zookeeper_session_timeout_ms;     /* zookeeper.session.timeout.ms */
    int32_t zookeeper_connection_timeout_ms;  /* zookeeper.connection.timeout.ms (0: session) */
    char admin_listeners[256];            /* admin.listeners (HTTP) */
    char admin_token[256];                /* admin.token: bearer token for /sql, /metrics */
    char schema_registry_listeners[256];  /* schema.registry.listeners ("": 127.0.0.1:8081) */
    char admin_socket[256];               /* admin.socket ("": <data dir>/admin.sock; none) */
    /* the authorizer (daemon/security/sec_authz.c) */
    char authorizer_class_name[256];      /* authorizer.class.name ("" = off) */
    char super_users[4096];               /* super.users: "User:a;User:b" */
    bool allow_everyone_if_no_acl_found;  /* allow.everyone.if.no.acl.found */
    int64_t admin_sql_timeout_ms;         /* admin.sql.timeout.ms: per statement */
    int64_t admin_sql_max_rows;           /* admin.sql.max.rows: per result */
    int64_t change_notification_expiration_ms;  /* change.notification.expiration.ms */
    /* group coordinator (daemon/group/group_coordinator.c) */
    int64_t group_initial_rebalance_delay_ms;     /* group.initial.rebalance.delay.ms */
    int32_t group_min_session_timeout_ms;         /* group.min.session.timeout.ms */
    int32_t group_max_session_timeout_ms;         /* group.max.session.timeout.ms */
    int64_t offsets_retention_minutes;            /* offsets.retention.minutes */
    int64_t offsets_retention_check_interval_ms;  /* offsets.retention.check.interval.ms */
    int32_t offset_metadata_max_bytes;            /* offset.metadata.max.bytes */
    int64_t offsets_commit_linger_ms;             /* offsets.commit.linger.ms: how
                                                     long commits may wait for
                                                     others due (group_persist.c C7) */
    /* cluster mode: group state in __consumer_offsets (daemon/group/group_log.c) */
    int32_t offsets_topic_num_partitions;         /* offsets.topic.num.partitions */
    int16_t offsets_topic_replication_factor;     /* offsets.topic.replication.factor */
    int32_t offsets_commit_timeout_ms;            /* offsets.commit.timeout.ms */
    /* the transaction coordinator (daemon/txn/): state in __transaction_state */
    int32_t transaction_state_log_num_partitions;     /* transaction.state.log.num.partitions */
    int16_t transaction_state_log_replication_factor; /* transaction.state.log.replication.factor */
    int16_t transaction_state_log_min_isr;            /* transaction.state.log.min.isr */
    int32_t transaction_state_log_segment_bytes;      /* transaction.state.log.segment.bytes */
    int32_t transaction_max_timeout_ms;               /* transaction.max.timeout.ms */
    int32_t transactional_id_expiration_ms;           /* transactional.id.expiration.ms */
    int32_t transaction_abort_timed_out_transaction_cleanup_interval_ms;
    int32_t transaction_remove_expired_transaction_cleanup_interval_ms;
    bool transaction_partition_verification_enable;   /* KIP-890 */
    /* Coarse-unit keys as written: they set the retention.ms / segment.ms /
     * segment.jitter.ms topic defaults and are described as given. */
    char log_retention_hours[24];                 /* log.retention.hours */
    char log_retention_minutes[24];               /* log.retention.minutes */
    char log_roll_hours[24];                      /* log.roll.hours */
    char log_roll_jitter_hours[24];               /* log.roll.jitter.hours */
    int8_t unit_rank[3];          /* finest unit given so far, per topic key */
    /* Topic-level defaults from broker keys, by topic-level name. */
    md_kv *topic_defaults;
    size_t ntopic_defaults;
} bk_config;

enum bk_config_type {
    BK_CT_INT,          /* int16 or int32 target (by size), range min..max */
    BK_CT_LONG,         /* int64, range min..max */
    BK_CT_BOOL,
    BK_CT_DOUBLE,       /* > 0 */
    BK_CT_STRING,       /* NUL-terminated, shorter than the target */
    BK_CT_LISTENERS,    /* NAME://host:port,... → listeners[], listen_host, ... */
    BK_CT_ADVERTISED,   /* NAME://host:port,... → listeners[].adv_host, ... */
    BK_CT_UNIT,         /* a topic default in a coarser unit (see below) */
};

/* One broker key.  BK_CT_UNIT keys also set topic default topic_key to
 * value × mult; the finest unit given wins whatever the order (rank: 1
 * hours, 2 minutes; the topic key's own broker key, e.g. log.retention.ms,
 * is rank 3 and lives in metadata/'s table). */
typedef struct bk_config_key {
    const char *name;
    enum bk_config_type type;
    size_t off, size;             /* parse target in bk_config */
    int64_t min, max;             /* BK_CT_INT / BK_CT_LONG: inclusive */
    const char *dflt;             /* Kafka's default as text; NULL: none */
    bool sensitive;               /* DescribeConfigs returns null for it */
    const char *topic_key;        /* BK_CT_UNIT */
    int64_t mult;                 /* BK_CT_UNIT */
    int rank;                     /* BK_CT_UNIT */
    const char *doc;
} bk_config_key;

/* The table, in the order DescribeConfigs lists it. */
const bk_config_key *bk_config_keys(size_t *n);
const bk_config_key *bk_config_key_find(const char *name);
/* k's value in c as Kafka renders it (integers in decimal, booleans
 * true/false, listeners as PLAINTEXT://host:port), in buf; NULL when unset.
 * A BK_CT_UNIT key not given renders as its default. */
/* The SASL mechanisms listener (a name, upper case; NULL: none) offers:
 * its listener.name.<l>.sasl.enabled.mechanisms, else sasl.enabled.mechanisms. */
const char *bk_config_sasl_mechanisms(const bk_config *c, const char *listener);
const char *bk_config_render(const bk_config *c, const bk_config_key *k,
                             char *buf, size_t cap);

void bk_config_init(bk_config *c);          /* the table's defaults */
void bk_config_free(bk_config *c);
/* Loads a properties file (may be NULL for defaults only).  0 or -1 with a
 * message in err naming the file, line and key. */
int  bk_config_load(bk_config *c, const char *path, char *err, size_t errlen);
/* Applies one "key=value" (command line override).  0 or -1 with err. */
int  bk_config_set(bk_config *c, const char *key, const char *value,
                   char *err, size_t errlen);
/* Checks cross-key rules after everything is set. */
int  bk_config_finish(bk_config *c, char *err, size_t errlen);
/* zookeeper.connect's form: host:port[,host:port...][/chroot], ports
 * 1..65535, a chroot of "/"-separated non-empty names.  0, or -1 with err
 * naming what is wrong. */
int  bk_zk_connect_check(const char *s, char *err, size_t errlen);
/* The listener called name (case-insensitive), or NULL. */
const bk_listener *bk_config_listener(const bk_config *c, const char *name);
/* "NAME://host:port,..." of every listener's advertised endpoint, and
 * "NAME:PROTO,..." (Kafka's /brokers/ids/<id> fields), into buf. */
void bk_config_endpoints(const bk_config *c, char *buf, size_t cap);
void bk_config_protocol_map(const bk_config *c, char *buf, size_t cap);

/* Kafka's JAAS line "<LoginModule> <flag> key=value ... ;" (values
 * unquoted or in double quotes with backslash escapes): the module's class
 * name and its username and password options.  0, or -1 with err. */
int bk_jaas_parse(const char *text, char *module, size_t modcap, char *user, size_t ucap,
                  char *password, size_t pcap, char *err, size_t errlen);
/* The PLAIN users of listener (by name, any case): the user_<name> options
 * of its listener.name.<listener>.plain.sasl.jaas.config, else of
 * sasl.jaas.config, when that line is a PlainLoginModule's (Kafka's
 * PlainServerCallbackHandler reads no other module).  NULL for no such
 * listener; ->n == 0 when none are configured. */
const bk_plain_users *bk_config_plain_users(const bk_config *c, const char *listener);

#endif
