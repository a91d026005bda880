/*
 * Broker configuration (see broker_config.h).
 *
 * Keys come in two kinds:
 *   1. broker keys handled here (broker.id, listeners, log.dirs, …), each a
 *      row in `keys` with its type, range, default and documentation;
 *   2. topic defaults under their broker names, found through metadata/'s
 *      config definitions (md_config_def_by_broker_key), validated with the
 *      same rules as topic configs and stored by topic-level name.
 * log.retention.{hours,minutes,ms} and log.roll.{hours,ms} follow Kafka's
 * precedence: the finest unit given wins.
 *
 * Invariants:
 *   C1. `keys` is the one list of broker keys: bk_config_set parses only
 *       what it lists (plus metadata/'s broker keys), bk_config_init sets
 *       each row's dflt through the same parser, and DescribeConfigs lists
 *       every row (tests/unit/test_d_config.c checks the three agree).
 *   C2. A sensitive key's value never leaves the broker: DescribeConfigs
 *       returns it as null with IsSensitive set.
 */
#include "daemon/broker_config.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <openssl/crypto.h>

#define F(field) offsetof(bk_config, field), sizeof(((bk_config *)0)->field)
#define INT(n, field, lo, hi, d, doc)  { n, BK_CT_INT, F(field), lo, hi, d, false, NULL, 0, 0, doc }
#define LONG(n, field, lo, hi, d, doc) { n, BK_CT_LONG, F(field), lo, hi, d, false, NULL, 0, 0, doc }
#define BOOL(n, field, d, doc)         { n, BK_CT_BOOL, F(field), 0, 0, d, false, NULL, 0, 0, doc }
#define STR(n, field, d, doc)          { n, BK_CT_STRING, F(field), 0, 0, d, false, NULL, 0, 0, doc }
#define UNIT(n, field, d, topic, mult, rank, doc) \
    { n, BK_CT_UNIT, F(field), 0, 0, d, false, topic, mult, rank, doc }
static const bk_config_key keys[] = {
    INT("broker.id", broker_id, 0, INT32_MAX, "0", "this broker's id"),
    { "listeners", BK_CT_LISTENERS, F(listeners_text), 0, 0, "PLAINTEXT://127.0.0.1:9092", false,
      NULL, 0, 0, "NAME://host:port,... to listen on (empty host: all addresses)" },
    { "advertised.listeners", BK_CT_ADVERTISED, F(advertised_text), 0, 0, NULL, false,
      NULL, 0, 0, "NAME://host:port,... given to clients in Metadata; default: listeners" },
    STR("listener.security.protocol.map", protocol_map, NULL,
        "NAME:PROTOCOL,... for listeners not named after their security protocol"),
    STR("inter.broker.listener.name", inter_broker_listener_name, NULL,
        "the listener brokers use to reach each other (replica fetchers)"),
    STR("security.inter.broker.protocol", security_inter_broker_protocol, NULL,
        "the listener named after this protocol is the inter-broker one; "
        "default PLAINTEXT (else the first listener)"),
    STR("ssl.keystore.type", ssl_keystore_type, "PEM", "keystore format: PEM"),
    STR("ssl.keystore.location", ssl_keystore_location, NULL,
        "PEM file with the certificate chain and the private key"),
    { "ssl.keystore.certificate.chain", BK_CT_STRING, F(ssl_keystore_certificate_chain), 0, 0,
      NULL, false, NULL, 0, 0, "the certificate chain in PEM, inline" },
    { "ssl.keystore.key", BK_CT_STRING, F(ssl_keystore_key), 0, 0, NULL, true, NULL, 0, 0,
      "the private key in PEM, inline" },
    { "ssl.key.password", BK_CT_STRING, F(ssl_key_password), 0, 0, NULL, true, NULL, 0, 0,
      "password of an encrypted private key" },
    { "password.encoder.secret", BK_CT_STRING, F(password_encoder_secret), 0, 0, NULL, true,
      NULL, 0, 0, "the secret cluster links' secret settings are encrypted with at rest "
      "(SQLite, ZooKeeper); the same on every broker; cluster mode needs it for a link with "
      "secrets; standalone without it: a key made once in <log.dirs>/password-encoder.key" },
    { "password.encoder.old.secret", BK_CT_STRING, F(password_encoder_old_secret), 0, 0, NULL,
      true, NULL, 0, 0, "the secret before password.encoder.secret: values it encrypted are "
      "read and encrypted again with the new one" },
    STR("password.encoder.keyfactory.algorithm", password_encoder_keyfactory_algorithm,
        "PBKDF2WithHmacSHA512", "the key derivation: PBKDF2WithHmacSHA512 (only)"),
    STR("password.encoder.cipher.algorithm", password_encoder_cipher_algorithm,
        "AES/GCM/NoPadding", "the cipher: AES/GCM/NoPadding (only)"),
    INT("password.encoder.key.length", password_encoder_key_length, 256, 256, "256",
        "the key length in bits: 256 (only)"),
    INT("password.encoder.iterations", password_encoder_iterations, 1024, 10000000, "4096",
        "PBKDF2 iterations (once, at start)"),
    STR("ssl.truststore.type", ssl_truststore_type, "PEM", "truststore format: PEM"),
    STR("ssl.truststore.location", ssl_truststore_location, NULL,
        "PEM file of the CA certificates client (and broker) certificates must chain to"),
    STR("ssl.truststore.certificates", ssl_truststore_certificates, NULL,
        "the trusted CA certificates in PEM, inline"),
    STR("ssl.client.auth", ssl_client_auth, "none",
        "none, requested or required: whether TLS clients present a certificate"),
    STR("ssl.enabled.protocols", ssl_enabled_protocols, "TLSv1.2,TLSv1.3",
        "TLS versions accepted: TLSv1.2, TLSv1.3"),
    STR("ssl.endpoint.identification.algorithm", ssl_endpoint_identification_algorithm,
        "https", "https: a broker checks the host name in the certificate of the broker "
        "it replicates from; empty: no check"),
    LONG("ssl.handshake.timeout.ms", ssl_handshake_timeout_ms, 1, 3600000, "10000",
         "a TLS handshake not done in this time closes the connection"),
    STR("log.dirs", log_dirs, "./data", "data directory (the first one is used)"),
    STR("log.dir", log_dirs, NULL, "the same as log.dirs"),
    STR("broker.rack", rack, NULL, "rack id given to clients in Metadata"),
    STR("zookeeper.connect", zookeeper_connect, NULL,
        "ZooKeeper ensemble host:port[,host:port...][/chroot]; set: cluster mode"),
    INT("zookeeper.session.timeout.ms", zookeeper_session_timeout_ms, 1000, 600000, "18000",
        "ZooKeeper session timeout: a broker silent this long is declared dead"),
    INT("zookeeper.connection.timeout.ms", zookeeper_connection_timeout_ms, 100, 600000, NULL,
        "how long startup waits to reach ZooKeeper; default: the session timeout"),
    INT("num.partitions", num_partitions, 1, 100000, "1",
        "partitions of an auto-created topic or a CreateTopics without a count"),
    INT("default.replication.factor", default_replication_factor, 1, 32767, "1",
        "replication factor of an auto-created topic"),
    BOOL("auto.create.topics.enable", auto_create_topics_enable, "true",
         "Metadata and Produce create unknown topics"),
    BOOL("delete.topic.enable", delete_topic_enable, "true", "DeleteTopics is allowed"),
    INT("socket.request.max.bytes", socket_request_max_bytes, 64, INT32_MAX, "104857600",
        "largest request frame; a larger one closes the connection"),
    LONG("queued.max.request.bytes", queued_max_request_bytes, -1, INT64_MAX, "-1",
         "request bytes read but not yet handled, all connections; -1 no limit"),
    LONG("connection.max.queued.bytes", connection_max_queued_bytes, 65536, INT64_MAX, "67108864",
         "answer bytes queued on one connection before it stops being read"),
    INT("max.connections", max_connections, 1, INT32_MAX, "10000", "open client connections"),
    INT("max.connections.per.ip", max_connections_per_ip, 1, INT32_MAX, "10000",
        "open client connections from one address"),
    LONG("connections.max.idle.ms", connections_max_idle_ms, -1, INT64_MAX, "600000",
         "idle time after which a connection is closed; -1 never"),
    STR("sasl.enabled.mechanisms", sasl_enabled_mechanisms, "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
        "SASL mechanisms a SASL listener offers (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512); "
        "listener.name.<listener>.sasl.enabled.mechanisms wins"),
    LONG("connections.max.reauth.ms", connections_max_reauth_ms, 0, INT64_MAX, "0",
         "SASL session lifetime: the client re-authenticates within it or is closed; 0 never"),
    STR("sasl.mechanism.inter.broker.protocol", sasl_mechanism_inter_broker_protocol, "PLAIN",
        "the mechanism replica fetchers log in with on a SASL inter-broker listener (PLAIN, "
        "SCRAM-SHA-256, SCRAM-SHA-512; Kafka's GSSAPI default is not served)"),
    { "sasl.jaas.config", BK_CT_STRING, F(sasl_jaas_config), 0, 0, NULL, true, NULL, 0, 0,
      "the broker's own SASL login: Kafka's JAAS line (PlainLoginModule or ScramLoginModule "
      "required username=\"..\" password=\"..\";); a PlainLoginModule's "
      "user_<name>=\"..\" options are PLAIN's users (daemon/security/sec_sasl.c inv. 6); "
      "listener.name.<listener>.<mechanism>.sasl.jaas.config wins" },
    LONG("log.retention.check.interval.ms", log_retention_check_interval_ms, 1, INT64_MAX,
         "300000", "how often retention looks for segments to delete"),
    UNIT("log.retention.hours", log_retention_hours, "168", "retention.ms", 3600000, 1,
         "retention.ms default in hours (log.retention.minutes and .ms win)"),
    UNIT("log.retention.minutes", log_retention_minutes, NULL, "retention.ms", 60000, 2,
         "retention.ms default in minutes (log.retention.ms wins)"),
    UNIT("log.roll.hours", log_roll_hours, "168", "segment.ms", 3600000, 1,
         "segment.ms default in hours (log.roll.ms wins)"),
    UNIT("log.roll.jitter.hours", log_roll_jitter_hours, "0", "segment.jitter.ms", 3600000, 1,
         "segment.jitter.ms default in hours (log.roll.jitter.ms wins)"),
    BOOL("log.cleaner.enable", log_cleaner_enable, "true", "compact cleanup.policy=compact topics"),
    INT("log.cleaner.threads", log_cleaner_threads, 1, 64, "1", "compaction threads"),
    LONG("log.cleaner.dedupe.buffer.size", log_cleaner_dedupe_buffer_size, 16384, INT64_MAX,
         "134217728", "memory for the key map of one compaction, all threads"),
    { "log.cleaner.io.max.bytes.per.second", BK_CT_DOUBLE,
      F(log_cleaner_io_max_bytes_per_second), 0, 0, "1.7976931348623157e308", false, NULL, 0, 0,
      "compaction read+write rate cap, all threads" },
    LONG("log.cleaner.backoff.ms", log_cleaner_backoff_ms, 1, INT64_MAX, "15000",
         "pause when no partition needs compaction"),
    LONG("log.flush.scheduler.interval.ms", log_flush_scheduler_interval_ms, 1, INT64_MAX,
         "1000", "how often flush.ms is checked"),
    LONG("log.flush.offset.checkpoint.interval.ms", log_flush_offset_checkpoint_interval_ms, 1,
         INT64_MAX, "60000", "how often recovery points are saved"),
    LONG("leader.replication.throttled.rate", leader_replication_throttled_rate, 0, INT64_MAX,
         "9223372036854775807", "bytes/s a leader serves the replicas a reassignment adds "
         "(0, or 1 TB/s and up: unthrottled; dynamic)"),
    LONG("follower.replication.throttled.rate", follower_replication_throttled_rate, 0,
         INT64_MAX, "9223372036854775807", "bytes/s a follower copies of the partitions a "
         "reassignment adds it to (0, or 1 TB/s and up: unthrottled; dynamic)"),
    INT("replica.fetch.max.bytes", replica_fetch_max_bytes, 1024, INT32_MAX, "1048576",
        "a follower asks this much of each partition per fetch (a larger first batch still comes)"),
    INT("replica.fetch.response.max.bytes", replica_fetch_response_max_bytes, 1024, INT32_MAX,
        "10485760", "a follower's whole fetch response at most"),
    INT("replica.fetch.wait.max.ms", replica_fetch_wait_max_ms, 0, 60000, "500",
        "how long a leader holds a follower's fetch while there is nothing new"),
    INT("replica.fetch.min.bytes", replica_fetch_min_bytes, 1, INT32_MAX, "1",
        "bytes a follower's fetch waits for"),
    INT("replica.fetch.backoff.ms", replica_fetch_backoff_ms, 0, 60000, "1000",
        "a follower waits this long after a failed fetch"),
    INT("num.replica.fetchers", num_replica_fetchers, 1, 64, "1",
        "fetcher connections per leader broker"),
    LONG("replica.lag.time.max.ms", replica_lag_time_max_ms, 100, INT64_MAX, "30000",
         "a follower not caught up for this long leaves the ISR"),
    BOOL("controlled.shutdown.enable", controlled_shutdown_enable, "true",
         "cluster mode: at SIGTERM, ask the controller to move this broker's leaderships first"),
    INT("controlled.shutdown.max.retries", controlled_shutdown_max_retries, 1, INT32_MAX, "3",
        "controlled shutdown: attempts before the broker stops anyway"),
    LONG("controlled.shutdown.retry.backoff.ms", controlled_shutdown_retry_backoff_ms, 1,
         INT32_MAX, "5000", "controlled shutdown: how long one attempt waits"),
    BOOL("auto.leader.rebalance.enable", auto_leader_rebalance_enable, "true",
         "the controller moves leadership back to each partition's preferred replica"),
    LONG("leader.imbalance.check.interval.seconds", leader_imbalance_check_interval_seconds, 1,
         INT32_MAX, "300", "how often the controller checks for leader imbalance"),
    INT("leader.imbalance.per.broker.percentage", leader_imbalance_per_broker_percentage, 0, 100,
        "10", "share of a broker's preferred partitions led elsewhere that triggers a rebalance"),
    LONG("leader.recovery.wait.ms", leader_recovery_wait_ms, 0, INT32_MAX, "30000",
         "no ISR member stayed up: how long the controller waits for the others to return "
         "before electing the longest log among those back"),
    INT("fetch.max.bytes", fetch_max_bytes, 1024, INT32_MAX, "57671680",
        "cap on one Fetch answer, whatever the request asks"),
    STR("admin.listeners", admin_listeners, NULL, "HTTP admin address (/sql, /metrics); empty: 127.0.0.1:9644 when free; none: off"),
    { "admin.token", BK_CT_STRING, F(admin_token), 0, 0, NULL, true, NULL, 0, 0,
      "bearer token the HTTP admin listener requires" },
    STR("schema.registry.listeners", schema_registry_listeners, NULL,
        "schema registry's HTTP address (Confluent's REST API); empty: 127.0.0.1:8081 when "
        "free; none: off"),
    STR("admin.socket", admin_socket, NULL,
        "admin Unix socket for root and the broker's user; empty: <log.dir>/admin.sock; none: off"),
    STR("authorizer.class.name", authorizer_class_name, NULL,
        "any value (e.g. kafka.security.authorizer.AclAuthorizer) turns ACL checks on"),
    STR("super.users", super_users, NULL, "principals allowed everything: User:a;User:b"),
    BOOL("allow.everyone.if.no.acl.found", allow_everyone_if_no_acl_found, "false",
         "with the authorizer on, a resource no ACL names is open to all"),
    LONG("admin.sql.timeout.ms", admin_sql_timeout_ms, 1, 3600000, "5000",
         "time limit of one /sql statement"),
    LONG("admin.sql.max.rows", admin_sql_max_rows, 1, INT32_MAX, "100000",
         "row limit of one /sql result"),
    LONG("change.notification.expiration.ms", change_notification_expiration_ms, 1,
         INT64_C(1) << 40, "900000",
         "cluster mode: ZooKeeper change notices (/kafka-acl-changes, /config/changes) older "
         "than this are deleted (Kafka's fixed changeExpirationMs, 15 minutes; settable for "
         "tests)"),
    LONG("group.initial.rebalance.delay.ms", group_initial_rebalance_delay_ms, 0, INT32_MAX,
         "3000", "wait for more members before an empty group's first rebalance"),
    INT("group.min.session.timeout.ms", group_min_session_timeout_ms, 1, INT32_MAX, "6000",
        "smallest session timeout a member may ask for"),
    INT("group.max.session.timeout.ms", group_max_session_timeout_ms, 1, INT32_MAX, "1800000",
        "largest session timeout a member may ask for"),
    LONG("offsets.retention.minutes", offsets_retention_minutes, 1, INT32_MAX, "10080",
         "committed offsets of an empty group expire after this"),
    LONG("offsets.retention.check.interval.ms", offsets_retention_check_interval_ms, 1, INT64_MAX,
         "600000", "how often expired offsets are looked for"),
    INT("offset.metadata.max.bytes", offset_metadata_max_bytes, 0, INT32_MAX, "4096",
        "largest metadata string of a committed offset"),
    LONG("offsets.commit.linger.ms", offsets_commit_linger_ms, 0, 1000, "5",
         "how long an offset commit may wait for commits other connections are due to send"),
    INT("offsets.topic.num.partitions", offsets_topic_num_partitions, 1, 10000, "50",
        "cluster mode: partitions of __consumer_offsets (group state)"),
    INT("offsets.topic.replication.factor", offsets_topic_replication_factor, 1, 32767, "3",
        "cluster mode: replicas of __consumer_offsets; created once this many brokers live"),
    INT("offsets.commit.timeout.ms", offsets_commit_timeout_ms, 1, INT32_MAX, "5000",
        "cluster mode: a commit waits this long for its replicas"),
    /* the transaction coordinator (daemon/txn/), Kafka's names and defaults */
    INT("transaction.state.log.num.partitions", transaction_state_log_num_partitions, 1, 10000,
        "50", "partitions of __transaction_state (transaction coordinators' state)"),
    INT("transaction.state.log.replication.factor", transaction_state_log_replication_factor, 1,
        32767, "3", "cluster mode: replicas of __transaction_state; created once this many "
        "brokers live (standalone: 1)"),
    INT("transaction.state.log.min.isr", transaction_state_log_min_isr, 1, 32767, "2",
        "cluster mode: min.insync.replicas of __transaction_state"),
    INT("transaction.state.log.segment.bytes", transaction_state_log_segment_bytes, 1048576,
        INT32_MAX, "104857600", "segment.bytes of __transaction_state"),
    INT("transaction.max.timeout.ms", transaction_max_timeout_ms, 1, INT32_MAX, "900000",
        "largest transaction.timeout.ms a producer may ask for"),
    INT("transactional.id.expiration.ms", transactional_id_expiration_ms, 1, INT32_MAX,
        "604800000", "a transactional id without a transaction this long is forgotten"),
    INT("transaction.abort.timed.out.transaction.cleanup.interval.ms",
        transaction_abort_timed_out_transaction_cleanup_interval_ms, 1, INT32_MAX, "10000",
        "how often transactions past their timeout are looked for (and aborted)"),
    INT("transaction.remove.expired.transaction.cleanup.interval.ms",
        transaction_remove_expired_transaction_cleanup_interval_ms, 1, INT32_MAX, "3600000",
        "how often expired transactional ids are looked for"),
    BOOL("transaction.partition.verification.enable", transaction_partition_verification_enable,
         "true", "a transactional write to a partition not yet in its transaction asks the "
         "coordinator first (KIP-890)"),
};
#undef UNIT
#undef STR
#undef BOOL
#undef LONG
#undef INT
#undef F

#define NKEYS (sizeof keys / sizeof keys[0])

/* Topic keys with coarse-unit broker keys; index into bk_config.unit_rank. */
static const char *const unit_topics[] = { "retention.ms", "segment.ms", "segment.jitter.ms" };

const bk_config_key *bk_config_keys(size_t *n)
{
    *n = NKEYS;
    return keys;
}

const bk_config_key *bk_config_key_find(const char *name)
{
    for (size_t i = 0; i < NKEYS; i++)
        if (!strcmp(keys[i].name, name))
            return &keys[i];
    return NULL;
}

void bk_config_init(bk_config *c)
{
    memset(c, 0, sizeof *c);
    for (size_t i = 0; i < NKEYS; i++) {
        char err[256];
        /* A unit key's default is the topic default's own (metadata/):
         * applying it would make it look set in the properties file. */
        if (!keys[i].dflt || keys[i].type == BK_CT_UNIT)
            continue;
        if (bk_config_set(c, keys[i].name, keys[i].dflt, err, sizeof err))
            abort();             /* a bad row in `keys`: test_d_config fails first */
    }
}

static void plain_users_free(bk_plain_users *u);

void bk_config_free(bk_config *c)
{
    for (int i = 0; i < BK_LISTENERS_MAX; i++)
        plain_users_free(&c->plain_users[i]);
    md_kv_free(c->topic_defaults, c->ntopic_defaults);
    c->topic_defaults = NULL;
    c->ntopic_defaults = 0;
}

static int parse_i64(const char *s, int64_t *out)
{
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno || end == s || *end)
        return -1;
    *out = v;
    return 0;
}

static int parse_bool(const char *s, bool *out)
{
    if (!strcasecmp(s, "true")) { *out = true; return 0; }
    if (!strcasecmp(s, "false")) { *out = false; return 0; }
    return -1;
}

/* "PLAINTEXT://host:port" (first listener only; "" host = all addresses). */
/* [SCHEME://]host:port; the scheme a security protocol (sec_peer.h),
 * PLAINTEXT when absent. */
/* One NAME://host:port (or host:port, named PLAINTEXT) of a comma list at
 * v into l->name/host/port; the end of it in *end. */
static int parse_endpoint(const char *v, bk_listener *l, const char **end)
{
    const char *p = strstr(v, "://");
    const char *comma = strchr(v, ',');
    if (p && comma && comma < p)
        p = NULL;
    snprintf(l->name, sizeof l->name, "PLAINTEXT");
    if (p) {
        size_t slen = (size_t)(p - v);
        if (slen == 0 || slen >= sizeof l->name)
            return -1;
        for (size_t i = 0; i < slen; i++)
            if (!isalnum((unsigned char)v[i]) && v[i] != '_' && v[i] != '-' && v[i] != '.')
                return -1;
        memcpy(l->name, v, slen);
        l->name[slen] = 0;
        for (char *q = l->name; *q; q++)
            *q = (char)toupper((unsigned char)*q);      /* Kafka upper-cases names */
    }
    p = p ? p + 3 : v;
    comma = strchr(p, ',');
    size_t len = comma ? (size_t)(comma - p) : strlen(p);
    *end = p + len;
    const char *colon = NULL;
    for (size_t i = 0; i < len; i++)
        if (p[i] == ':')
            colon = p + i;
    if (!colon)
        return -1;
    size_t hlen = (size_t)(colon - p);
    if (hlen >= sizeof l->host)
        return -1;
    char portbuf[16];
    size_t plen = len - hlen - 1;
    if (plen == 0 || plen >= sizeof portbuf)
        return -1;
    memcpy(portbuf, colon + 1, plen);
    portbuf[plen] = 0;
    int64_t pv;
    if (parse_i64(portbuf, &pv) || pv < 0 || pv > 65535)
        return -1;
    memcpy(l->host, p, hlen);
    l->host[hlen] = 0;
    if (l->host[0] == '[') {                  /* [::1] → ::1 */
        memmove(l->host, l->host + 1, hlen);
        char *rb = strchr(l->host, ']');
        if (rb) *rb = 0;
    }
    l->port = (int)pv;
    return 0;
}

/* A comma list of endpoints into out[0..*n); names unique (Kafka's rule). */
static int parse_endpoints(const char *v, bk_listener *out, int *n)
{
    *n = 0;
    while (*v) {
        if (*n == BK_LISTENERS_MAX)
            return -1;
        bk_listener *l = &out[*n];
        memset(l, 0, sizeof *l);
        const char *end;
        if (parse_endpoint(v, l, &end))
            return -1;
        for (int i = 0; i < *n; i++)
            if (!strcmp(out[i].name, l->name))
                return -1;
        bk_secproto_parse(l->name, &l->proto);  /* custom names: in finish */
        (*n)++;
        v = *end ? end + 1 : end;
        while (*v == ' ')
            v++;
    }
    return *n > 0 ? 0 : -1;
}

static void first_listener(bk_config *c)
{
    snprintf(c->listen_host, sizeof c->listen_host, "%s", c->listeners[0].host);
    c->listen_port = c->listeners[0].port;
    c->listen_proto = c->listeners[0].proto;
}

static void kv_put(bk_config *c, const char *name, const char *value)
{
    for (size_t i = 0; i < c->ntopic_defaults; i++)
        if (!strcmp(c->topic_defaults[i].name, name)) {
            free(c->topic_defaults[i].value);
            c->topic_defaults[i].value = strdup(value);
            return;
        }
    c->topic_defaults = realloc(c->topic_defaults,
                                (c->ntopic_defaults + 1) * sizeof *c->topic_defaults);
    c->topic_defaults[c->ntopic_defaults].name = strdup(name);
    c->topic_defaults[c->ntopic_defaults].value = strdup(value);
    c->ntopic_defaults++;
}

static int unit_slot(const char *topic_key)
{
    for (size_t i = 0; i < sizeof unit_topics / sizeof unit_topics[0]; i++)
        if (!strcmp(unit_topics[i], topic_key))
            return (int)i;
    return -1;
}

/* key=value in units of mult ms sets topic default topic_key, unless a
 * finer unit (higher rank) set it already, whatever the order of keys. */
static int set_unit(bk_config *c, const char *key, const char *topic_key, int64_t mult,
                    int rank, const char *value, char *err, size_t errlen)
{
    int64_t v;
    if (parse_i64(value, &v) || (v < 0 && v != -1) || (v > 0 && v > INT64_MAX / mult)) {
        snprintf(err, errlen, "Invalid value %s for configuration %s: "
                 "must be a non-negative integer or -1", value, key);
        return -1;
    }
    int64_t ms = v < 0 ? -1 : v * mult;
    char buf[32];
    snprintf(buf, sizeof buf, "%lld", (long long)ms);
    if (md_config_check(topic_key, buf, err, errlen) != KP_NONE) {
        char inner[MD_ERRLEN];
        snprintf(inner, sizeof inner, "%s", err);
        snprintf(err, errlen, "Invalid value %s for configuration %s (%s)", value, key, inner);
        return -1;
    }
    int slot = unit_slot(topic_key);
    if (slot >= 0 && c->unit_rank[slot] > rank)
        return 0;
    if (slot >= 0)
        c->unit_rank[slot] = (int8_t)rank;
    kv_put(c, topic_key, buf);
    return 0;
}

/* listener.name.<mid>suf: true with [*mid, *mend) the part between. */
static bool listener_key(const char *key, const char *suf, const char **mid, const char **mend)
{
    static const char pre[] = "listener.name.";
    size_t kl = strlen(key), pl = sizeof pre - 1, sl = strlen(suf);
    if (kl <= pl + sl || strncmp(key, pre, pl) || strcmp(key + kl - sl, suf))
        return false;
    *mid = key + pl;
    *mend = key + kl - sl;
    return true;
}

/* listener.name.<listener>.sasl.enabled.mechanisms (Kafka's per-listener
 * override of sasl.enabled.mechanisms).  1 when key is one (kept in
 * c->lmechs), 0 when not, -1 with err. */
static int set_listener_mechs(bk_config *c, const char *key, const char *value, char *err,
                              size_t errlen)
{
    const char *mid, *mend;
    if (!listener_key(key, ".sasl.enabled.mechanisms", &mid, &mend))
        return 0;
    struct bk_listener_mechs e;
    memset(&e, 0, sizeof e);
    if ((size_t)(mend - mid) >= sizeof e.listener || strlen(value) >= sizeof e.value) {
        snprintf(err, errlen, "Invalid value for configuration %s: too long", key);
        return -1;
    }
    for (size_t i = 0; mid + i < mend; i++)
        e.listener[i] = (char)toupper((unsigned char)mid[i]);
    strcpy(e.value, value);
    int at = 0;
    while (at < c->nlmechs && strcmp(c->lmechs[at].listener, e.listener))
        at++;
    if (at == (int)(sizeof c->lmechs / sizeof c->lmechs[0])) {
        snprintf(err, errlen, "%s: too many listener.name.*.sasl.enabled.mechanisms keys "
                 "(at most %zu)", key, sizeof c->lmechs / sizeof c->lmechs[0]);
        return -1;
    }
    c->lmechs[at] = e;
    if (at == c->nlmechs)
        c->nlmechs++;
    return 1;
}

const char *bk_config_sasl_mechanisms(const bk_config *c, const char *listener)
{
    for (int i = 0; listener && i < c->nlmechs; i++)
        if (!strcmp(c->lmechs[i].listener, listener))
            return c->lmechs[i].value;
    return c->sasl_enabled_mechanisms;
}

/* listener.name.<listener>.<mechanism>.sasl.jaas.config (Kafka's
 * per-listener form; the mechanism has no dot, the listener may).  1 when
 * key is one (kept in c->jaas), 0 when not, -1 with err. */
static int set_listener_jaas(bk_config *c, const char *key, const char *value, char *err,
                             size_t errlen)
{
    const char *mid, *mend, *dot = NULL;
    if (!listener_key(key, ".sasl.jaas.config", &mid, &mend))
        return 0;
    for (const char *q = mid; q < mend; q++)
        if (*q == '.')
            dot = q;
    struct bk_jaas_entry e;
    memset(&e, 0, sizeof e);
    if (!dot || dot == mid || dot + 1 == mend || (size_t)(dot - mid) >= sizeof e.listener ||
        (size_t)(mend - dot - 1) >= sizeof e.mechanism) {
        snprintf(err, errlen, "Unknown configuration key: %s (expected "
                 "listener.name.<listener>.<mechanism>.sasl.jaas.config)", key);
        return -1;
    }
    if (strlen(value) >= sizeof e.value) {
        snprintf(err, errlen, "Invalid value for configuration %s: too long", key);
        return -1;
    }
    for (size_t i = 0; mid + i < dot; i++)
        e.listener[i] = (char)toupper((unsigned char)mid[i]);
    for (size_t i = 0; dot + 1 + i < mend; i++)
        e.mechanism[i] = (char)toupper((unsigned char)dot[1 + i]);
    strcpy(e.value, value);
    int at = 0;
    while (at < c->njaas && (strcmp(c->jaas[at].listener, e.listener) ||
                             strcmp(c->jaas[at].mechanism, e.mechanism)))
        at++;
    if (at == (int)(sizeof c->jaas / sizeof c->jaas[0])) {
        snprintf(err, errlen, "%s: too many listener.name.*.sasl.jaas.config keys (at most "
                 "%zu)", key, sizeof c->jaas / sizeof c->jaas[0]);
        return -1;
    }
    c->jaas[at] = e;
    if (at == c->njaas)
        c->njaas++;
    return 1;
}

int bk_config_set(bk_config *c, const char *key, const char *value,
                  char *err, size_t errlen)
{
    int lj = set_listener_jaas(c, key, value, err, errlen);
    if (!lj)
        lj = set_listener_mechs(c, key, value, err, errlen);
    if (lj)
        return lj < 0 ? -1 : 0;
    const bk_config_key *k = bk_config_key_find(key);
    if (k) {
        char *field = (char *)c + k->off;
        int64_t v;
        bool bv;
        switch (k->type) {
        case BK_CT_INT:
        case BK_CT_LONG:
            if (parse_i64(value, &v) || v < k->min || v > k->max) {
                snprintf(err, errlen, "Invalid value %s for configuration %s: "
                         "must be an integer in [%lld, %lld]", value, key,
                         (long long)k->min, (long long)k->max);
                return -1;
            }
            if (k->type == BK_CT_LONG)
                *(int64_t *)(void *)field = v;
            else if (k->size == sizeof(int16_t))
                *(int16_t *)(void *)field = (int16_t)v;
            else
                *(int32_t *)(void *)field = (int32_t)v;
            return 0;
        case BK_CT_BOOL:
            if (parse_bool(value, &bv)) {
                snprintf(err, errlen, "Invalid value %s for configuration %s: "
                         "must be true or false", value, key);
                return -1;
            }
            *(bool *)(void *)field = bv;
            return 0;
        case BK_CT_DOUBLE: {
            char *end;
            errno = 0;
            double d = strtod(value, &end);
            if (errno || end == value || *end || !(d > 0)) {
                snprintf(err, errlen, "Invalid value %s for configuration %s: "
                         "must be a positive number", value, key);
                return -1;
            }
            *(double *)(void *)field = d;
            return 0;
        }
        case BK_CT_STRING:
            if (strlen(value) >= k->size) {
                snprintf(err, errlen, "Invalid value for configuration %s: too long", key);
                return -1;
            }
            strcpy(field, value);
            return 0;
        case BK_CT_LISTENERS:
        case BK_CT_ADVERTISED: {
            bk_listener tmp[BK_LISTENERS_MAX];
            int n;
            if (strlen(value) >= k->size || parse_endpoints(value, tmp, &n)) {
                snprintf(err, errlen, "Invalid value %s for configuration %s: expected "
                         "NAME://host:port[,NAME://host:port...] with distinct names "
                         "(at most %d)", value, key, BK_LISTENERS_MAX);
                return -1;
            }
            strcpy(field, value);
            if (k->type == BK_CT_LISTENERS) {
                memcpy(c->listeners, tmp, sizeof tmp);
                c->nlisteners = n;
                first_listener(c);
            }
            return 0;
        }
        case BK_CT_UNIT:
            if (set_unit(c, key, k->topic_key, k->mult, k->rank, value, err, errlen))
                return -1;
            snprintf(field, k->size, "%s", value);   /* parsed: at most 20 chars */
            return 0;
        }
    }
    const md_config_def *d = md_config_def_by_broker_key(key);
    if (d && unit_slot(d->name) >= 0)        /* log.retention.ms, log.roll.ms, … */
        return set_unit(c, key, d->name, 1, 3, value, err, errlen);
    if (d) {
        if (md_config_check(d->name, value, err, errlen) != KP_NONE) {
            char inner[MD_ERRLEN];
            snprintf(inner, sizeof inner, "%s", err);
            snprintf(err, errlen, "Invalid value %s for configuration %s (%s)",
                     value, key, inner);
            return -1;
        }
        kv_put(c, d->name, value);
        return 0;
    }
    snprintf(err, errlen, "Unknown configuration key: %s", key);
    return -1;
}

static char *trim(char *s)
{
    while (isspace((unsigned char)*s))
        s++;
    char *e = s + strlen(s);
    while (e > s && isspace((unsigned char)e[-1]))
        *--e = 0;
    return s;
}

int bk_config_load(bk_config *c, const char *path, char *err, size_t errlen)
{
    if (!path)
        return 0;
    FILE *f = fopen(path, "r");
    if (!f) {
        snprintf(err, errlen, "cannot open config file %s: %s", path, strerror(errno));
        return -1;
    }
    char line[8192];
    int lineno = 0;
    while (fgets(line, sizeof line, f)) {
        lineno++;
        char *s = trim(line);
        if (!*s || *s == '#' || *s == '!')
            continue;
        /* java.util.Properties, as Kafka reads the file: the key ends at
         * the first '=', ':' or white space; white space, one '=' or ':'
         * and white space again come before the value.  A line with no
         * separator is a key with an empty value (refused by name below,
         * never quoted whole: it may be a password typed on its own). */
        char *sep = s + strcspn(s, "=: \t\f");
        char *value = sep + strspn(sep, " \t\f");
        if (*value == '=' || *value == ':')
            value++;
        value = trim(value);
        bool bare = !*sep;
        *sep = 0;
        char *key = s;
        char inner[MD_ERRLEN + 64];
        if (bk_config_set(c, key, value, inner, sizeof inner)) {
            if (bare && !strncmp(inner, "Unknown configuration key", 25))
                snprintf(err, errlen, "%s:%d: expected key=value; the line is one word that "
                         "is no configuration key (not shown: it may be a secret)",
                         path, lineno);
            else
                snprintf(err, errlen, "%s:%d: %s", path, lineno, inner);
            fclose(f);
            return -1;
        }
    }
    fclose(f);
    return 0;
}

int bk_zk_connect_check(const char *s, char *err, size_t errlen)
{
    const char *chroot = strchr(s, '/');
    size_t hosts_len = chroot ? (size_t)(chroot - s) : strlen(s);
    const char *p = s, *end = s + hosts_len;
    while (p < end) {
        const char *comma = memchr(p, ',', (size_t)(end - p));
        const char *e = comma ? comma : end;
        const char *colon = NULL;
        for (const char *q = p; q < e; q++)
            if (*q == ':')
                colon = q;
        long port = 0;
        bool ok = colon && colon > p && colon + 1 < e && colon + 1 + 5 >= e;
        for (const char *q = colon ? colon + 1 : e; ok && q < e; q++)
            ok = isdigit((unsigned char)*q), port = port * 10 + (*q - '0');
        for (const char *q = p; ok && q < colon; q++)
            ok = isalnum((unsigned char)*q) || *q == '.' || *q == '-' || *q == '_';
        if (!ok || port < 1 || port > 65535) {
            snprintf(err, errlen, "zookeeper.connect: \"%.*s\" is not host:port "
                     "(expected host:port[,host:port...][/chroot])", (int)(e - p), p);
            return -1;
        }
        p = comma ? comma + 1 : e;
        if (comma && p == end) {
            snprintf(err, errlen, "zookeeper.connect: empty server after ','");
            return -1;
        }
    }
    if (hosts_len == 0) {
        snprintf(err, errlen, "zookeeper.connect: no server given "
                 "(expected host:port[,host:port...][/chroot])");
        return -1;
    }
    if (chroot && strcmp(chroot, "/")) {
        for (const char *q = chroot; *q; q++)
            if ((*q == '/' && (q[1] == '/' || q[1] == 0)) || (unsigned char)*q <= ' ') {
                snprintf(err, errlen, "zookeeper.connect: bad chroot \"%s\" "
                         "(expected /name[/name...])", chroot);
                return -1;
            }
    }
    return 0;
}

/* The protocol map's entry for name, or -1. */
static int map_lookup(const char *map, const char *name, bk_secproto *out)
{
    size_t nl = strlen(name);
    for (const char *e = map; *e;) {
        const char *comma = strchr(e, ',');
        size_t n = comma ? (size_t)(comma - e) : strlen(e);
        const char *colon = memchr(e, ':', n);
        if (colon && (size_t)(colon - e) == nl && !strncasecmp(e, name, nl)) {
            char proto[32];
            size_t pl = n - nl - 1;
            if (pl >= sizeof proto)
                return -1;
            memcpy(proto, colon + 1, pl);
            proto[pl] = 0;
            return bk_secproto_parse(proto, out);
        }
        e += n + !!comma;
    }
    return -1;
}

/* Names → protocols, advertised endpoints joined by name, the
 * inter-broker listener chosen (Kafka's rules, KafkaConfig.scala). */
static int finish_listeners(bk_config *c, char *err, size_t errlen)
{
    for (int i = 0; i < c->nlisteners; i++) {
        bk_listener *l = &c->listeners[i];
        if (map_lookup(c->protocol_map, l->name, &l->proto) &&
            bk_secproto_parse(l->name, &l->proto)) {
            snprintf(err, errlen, "listeners: listener %s has no security protocol "
                     "(name it in listener.security.protocol.map, e.g. %s:SSL)",
                     l->name, l->name);
            return -1;
        }
        const char *h = l->host;
        if (!h[0] || !strcmp(h, "0.0.0.0") || !strcmp(h, "::"))
            h = "127.0.0.1";
        snprintf(l->adv_host, sizeof l->adv_host, "%s", h);
        l->adv_port = l->port;
    }
    if (c->advertised_text[0]) {
        bk_listener adv[BK_LISTENERS_MAX];
        int n = 0;
        parse_endpoints(c->advertised_text, adv, &n);  /* checked when set */
        for (int i = 0; i < n; i++) {
            bk_listener *l = (bk_listener *)bk_config_listener(c, adv[i].name);
            if (!l) {
                snprintf(err, errlen, "advertised.listeners: %s is not a listener "
                         "of listeners=%s", adv[i].name, c->listeners_text);
                return -1;
            }
            snprintf(l->adv_host, sizeof l->adv_host, "%s", adv[i].host);
            l->adv_port = adv[i].port;
        }
    }
    const char *ib = c->inter_broker_listener_name;
    if (ib[0] && c->security_inter_broker_protocol[0]) {
        snprintf(err, errlen, "inter.broker.listener.name and "
                 "security.inter.broker.protocol cannot both be set");
        return -1;
    }
    if (!ib[0])
        ib = c->security_inter_broker_protocol[0] ? c->security_inter_broker_protocol
                                                  : "PLAINTEXT";
    const bk_listener *l = bk_config_listener(c, ib);
    if (!l && (c->inter_broker_listener_name[0] || c->security_inter_broker_protocol[0])) {
        snprintf(err, errlen, "inter-broker listener %s is not among listeners=%s",
                 ib, c->listeners_text);
        return -1;
    }
    c->inter_broker_listener = l ? (int)(l - c->listeners) : 0;
    first_listener(c);
    snprintf(c->advertised_host, sizeof c->advertised_host, "%s", c->listeners[0].adv_host);
    c->advertised_port = c->listeners[0].adv_port;
    return 0;
}

static int finish_ssl(bk_config *c, char *err, size_t errlen)
{
    if (strcasecmp(c->ssl_keystore_type, "PEM") || strcasecmp(c->ssl_truststore_type, "PEM")) {
        snprintf(err, errlen, "ssl.keystore.type and ssl.truststore.type: only PEM "
                 "is supported");
        return -1;
    }
    if (strcmp(c->ssl_client_auth, "none") && strcmp(c->ssl_client_auth, "requested") &&
        strcmp(c->ssl_client_auth, "required")) {
        snprintf(err, errlen, "Invalid value %s for configuration ssl.client.auth: "
                 "expected none, requested or required", c->ssl_client_auth);
        return -1;
    }
    for (const char *e = c->ssl_enabled_protocols; *e;) {
        const char *comma = strchr(e, ',');
        size_t n = comma ? (size_t)(comma - e) : strlen(e);
        while (n && *e == ' ')
            e++, n--;
        if (!(n == 7 && (!strncmp(e, "TLSv1.2", 7) || !strncmp(e, "TLSv1.3", 7)))) {
            snprintf(err, errlen, "Invalid value %s for configuration "
                     "ssl.enabled.protocols: expected TLSv1.2 and/or TLSv1.3",
                     c->ssl_enabled_protocols);
            return -1;
        }
        e += n + !!comma;
    }
    bool tls = false;
    for (int i = 0; i < c->nlisteners; i++)
        tls |= c->listeners[i].proto == BK_SEC_SSL || c->listeners[i].proto == BK_SEC_SASL_SSL;
    tls |= !strncmp(c->admin_listeners, "https://", 8);
    tls |= !strncmp(c->schema_registry_listeners, "https://", 8);
    if (tls && !c->ssl_keystore_location[0] &&
        !(c->ssl_keystore_certificate_chain[0] && c->ssl_keystore_key[0])) {
        snprintf(err, errlen, "a TLS listener needs ssl.keystore.location (or "
                 "ssl.keystore.certificate.chain and ssl.keystore.key)");
        return -1;
    }
    return 0;
}

/* ---- the broker's own SASL login (sasl.jaas.config) ----------------------------- */
/* One JAAS token at *p: a bare word (up to space, '=' or ';') or a double-
 * quoted string with backslash escapes, into out.  0, or -1 with err. */
static int jaas_token(const char **p, char *out, size_t cap, char *err, size_t errlen)
{
    const char *q = *p;
    size_t o = 0;
    if (*q == '"') {
        for (q++; *q && *q != '"'; q++) {
            if (*q == '\\' && q[1])
                q++;                       /* \" and \\ (and any \x: x) */
            if (o + 1 >= cap) {
                snprintf(err, errlen, "a value is too long");
                return -1;
            }
            out[o++] = *q;
        }
        if (*q != '"') {
            snprintf(err, errlen, "a quoted value has no closing quote");
            return -1;
        }
        q++;
    } else {
        for (; *q && !isspace((unsigned char)*q) && *q != '=' && *q != ';'; q++) {
            if (o + 1 >= cap) {
                snprintf(err, errlen, "a name or value is too long");
                return -1;
            }
            out[o++] = *q;
        }
        if (o == 0) {
            /* the character only: what follows may be a password */
            snprintf(err, errlen, "expected a name or value at '%c'", *q ? *q : ';');
            return -1;
        }
    }
    out[o] = 0;
    *p = q;
    return 0;
}

static const char *skip_space(const char *p)
{
    while (isspace((unsigned char)*p))
        p++;
    return p;
}

/* The options of one JAAS line, each passed to fn(name, value, arg, err)
 * in order (names and values up to 511 bytes: fn refuses what its field
 * cannot hold); the module's class name in
 * module.  0, or -1 with err (fn's, or the line's shape; a message never
 * quotes a value: they are passwords). */
typedef int (*jaas_option_fn)(const char *name, const char *value, void *arg, char *err,
                              size_t errlen);

static int jaas_options(const char *text, char *module, size_t modcap, jaas_option_fn fn,
                        void *arg, char *err, size_t errlen)
{
    char flag[32], name[512], value[512];
    const char *p = skip_space(text);
    if (jaas_token(&p, module, modcap, err, errlen))
        return -1;
    p = skip_space(p);
    if (jaas_token(&p, flag, sizeof flag, err, errlen) ||
        (strcmp(flag, "required") && strcmp(flag, "requisite") &&
         strcmp(flag, "sufficient") && strcmp(flag, "optional"))) {
        snprintf(err, errlen, "expected \"<LoginModule> required key=\"value\" ...;\" "
                 "(the flag after the login module: required, requisite, sufficient or "
                 "optional)");
        return -1;
    }
    for (p = skip_space(p); *p && *p != ';'; p = skip_space(p)) {
        if (jaas_token(&p, name, sizeof name, err, errlen))
            return -1;
        p = skip_space(p);
        if (*p != '=') {
            snprintf(err, errlen, "option %s has no value (expected %s=\"...\")", name, name);
            return -1;
        }
        p = skip_space(p + 1);
        int rc = jaas_token(&p, value, sizeof value, err, errlen) ? -1
                 : fn(name, value, arg, err, errlen);
        OPENSSL_cleanse(value, sizeof value);
        if (rc)
            return -1;
    }
    if (*p != ';' || *skip_space(p + 1)) {
        snprintf(err, errlen, "expected one login module ending with ';'");
        return -1;
    }
    return 0;
}

struct jaas_login { char *user, *password; size_t ucap, pcap; };

/* bk_jaas_parse's options: username and password. */
static int login_option(const char *name, const char *value, void *arg, char *err,
                        size_t errlen)
{
    struct jaas_login *l = arg;
    bool is_user = !strcmp(name, "username"), is_pw = !strcmp(name, "password");
    if ((is_user || is_pw) && strlen(value) >= (is_user ? l->ucap : l->pcap)) {
        /* cut short, it would log in with another name or password */
        snprintf(err, errlen, "%s is too long (at most %zu bytes)", name,
                 (is_user ? l->ucap : l->pcap) - 1);
        return -1;
    }
    if (is_user)
        snprintf(l->user, l->ucap, "%s", value);
    else if (is_pw)
        snprintf(l->password, l->pcap, "%s", value);
    /* other options (user_<name>=: bk_config_plain_users; tokenauth=) are the server's */
    return 0;
}

int bk_jaas_parse(const char *text, char *module, size_t modcap, char *user, size_t ucap,
                  char *password, size_t pcap, char *err, size_t errlen)
{
    struct jaas_login l = { user, password, ucap, pcap };
    user[0] = password[0] = 0;
    if (jaas_options(text, module, modcap, login_option, &l, err, errlen))
        return -1;
    if (!user[0] || !password[0]) {
        snprintf(err, errlen, "the login module needs username=\"...\" and password=\"...\"");
        return -1;
    }
    return 0;
}

/* ---- PLAIN's users (user_<name>="<password>", Kafka's PlainServerCallbackHandler) -- */
#define PLAIN_LOGIN_MODULE "org.apache.kafka.common.security.plain.PlainLoginModule"

static void plain_users_free(bk_plain_users *u)
{
    if (u->v)
        OPENSSL_cleanse(u->v, sizeof *u->v * (size_t)u->n);
    free(u->v);
    u->v = NULL;
    u->n = 0;
}

/* One option of a listener's PlainLoginModule: a user_<name> enters u. */
static int plain_user_option(const char *name, const char *value, void *arg, char *err,
                             size_t errlen)
{
    bk_plain_users *u = arg;
    if (strncmp(name, "user_", 5))
        return 0;                          /* username=, password=: the broker's own */
    const char *user = name + 5;
    if (!user[0]) {
        snprintf(err, errlen, "option user_ names no user (expected user_<name>=\"<password>\")");
        return -1;
    }
    if (strlen(user) >= BK_JAAS_VALUE_MAX || strlen(value) >= BK_JAAS_VALUE_MAX) {
        snprintf(err, errlen, "option user_%.40s%s: the %s is too long (at most %d bytes)",
                 user, strlen(user) > 40 ? "..." : "",
                 strlen(user) >= BK_JAAS_VALUE_MAX ? "user name" : "password",
                 BK_JAAS_VALUE_MAX - 1);
        return -1;
    }
    if (!value[0]) {
        snprintf(err, errlen, "option %s has an empty password (PLAIN refuses one)", name);
        return -1;
    }
    for (int i = 0; i < u->n; i++)
        if (!strcmp(u->v[i].name, user)) {
            snprintf(err, errlen, "option %s is given twice", name);
            return -1;
        }
    bk_plain_user *v = realloc(u->v, sizeof *v * (size_t)(u->n + 1));
    if (!v) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    u->v = v;
    snprintf(v[u->n].name, sizeof v[u->n].name, "%s", user);
    snprintf(v[u->n].password, sizeof v[u->n].password, "%s", value);
    u->n++;
    return 0;
}

/* Each listener's PLAIN users: from listener.name.<l>.plain.sasl.jaas.config,
 * else sasl.jaas.config, when that line's module is PlainLoginModule (Kafka
 * reads the options of that module only; another module has no users).  A
 * malformed line fails startup naming its key, whatever the listener. */
static int finish_plain_users(bk_config *c, char *err, size_t errlen)
{
    for (int i = 0; i < c->nlisteners; i++) {
        bk_plain_users *u = &c->plain_users[i];
        plain_users_free(u);
        const char *jaas = c->sasl_jaas_config;
        char from[BK_LISTENER_NAME_MAX + 64] = "sasl.jaas.config";
        for (int k = 0; k < c->njaas; k++)
            if (!strcasecmp(c->jaas[k].listener, c->listeners[i].name) &&
                !strcmp(c->jaas[k].mechanism, "PLAIN")) {
                jaas = c->jaas[k].value;
                snprintf(from, sizeof from, "listener.name.%s.plain.sasl.jaas.config",
                         c->listeners[i].name);
                for (char *q = from; *q; q++)
                    *q = (char)tolower((unsigned char)*q);
            }
        if (!jaas[0] || !bk_secproto_is_sasl(c->listeners[i].proto))
            continue;
        char module[256], inner[200];
        if (jaas_options(jaas, module, sizeof module, plain_user_option, u, inner,
                         sizeof inner)) {
            plain_users_free(u);
            snprintf(err, errlen, "Invalid value for configuration %s: %s", from, inner);
            return -1;
        }
        if (strcmp(module, PLAIN_LOGIN_MODULE))
            plain_users_free(u);           /* a ScramLoginModule's user_ are not PLAIN's */
    }
    return 0;
}

const bk_plain_users *bk_config_plain_users(const bk_config *c, const char *listener)
{
    for (int i = 0; listener && i < c->nlisteners; i++)
        if (!strcasecmp(c->listeners[i].name, listener))
            return &c->plain_users[i];
    return NULL;
}

/* Is name one of the comma (or space) separated list? */
static bool list_has(const char *list, const char *name)
{
    size_t n = strlen(name);
    for (const char *p = list; *p;) {
        p += strspn(p, ", ");
        size_t k = strcspn(p, ", ");
        if (k == n && !strncmp(p, name, n))
            return true;
        p += k;
    }
    return false;
}

/* A SASL inter-broker listener in cluster mode: the mechanism and the
 * broker's credentials its replica fetchers log in with (Kafka's
 * KafkaConfig checks).  Standalone, no broker connects to another
 * (repl_fetcher.c F4), so nothing is needed. */
static int finish_inter_broker_sasl(bk_config *c, char *err, size_t errlen)
{
    const bk_listener *ib = &c->listeners[c->inter_broker_listener];
    c->ib_sasl_user[0] = c->ib_sasl_password[0] = 0;
    if (!bk_secproto_is_sasl(ib->proto) || !c->zookeeper_connect[0])
        return 0;
    const char *m = c->sasl_mechanism_inter_broker_protocol;
    bool plain = !strcmp(m, "PLAIN");
    if (!plain && strcmp(m, "SCRAM-SHA-256") && strcmp(m, "SCRAM-SHA-512")) {
        snprintf(err, errlen, "sasl.mechanism.inter.broker.protocol=%s is not supported: "
                 "PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512", m);
        return -1;
    }
    const char *enabled = bk_config_sasl_mechanisms(c, ib->name);
    char key[BK_LISTENER_NAME_MAX + 64];
    if (!list_has(enabled, m)) {
        if (enabled == c->sasl_enabled_mechanisms)
            snprintf(key, sizeof key, "sasl.enabled.mechanisms");
        else
            snprintf(key, sizeof key, "listener.name.%s.sasl.enabled.mechanisms", ib->name);
        for (char *q = key; *q; q++)
            *q = (char)tolower((unsigned char)*q);
        snprintf(err, errlen, "sasl.mechanism.inter.broker.protocol must be included in "
                 "%s when SASL is used for inter-broker communication "
                 "(%s is not in %s)", key, m, enabled);
        return -1;
    }
    const char *jaas = c->sasl_jaas_config, *from = "sasl.jaas.config";
    snprintf(key, sizeof key, "listener.name.%s.%s.sasl.jaas.config", ib->name, m);
    for (char *q = key; *q; q++)
        *q = (char)tolower((unsigned char)*q);
    for (int i = 0; i < c->njaas; i++)
        if (!strcmp(c->jaas[i].listener, ib->name) && !strcmp(c->jaas[i].mechanism, m)) {
            jaas = c->jaas[i].value;
            from = key;
        }
    if (!jaas[0]) {
        snprintf(err, errlen, "the inter-broker listener %s is %s: set the broker's own "
                 "credentials in %s (or sasl.jaas.config), e.g. %s%s required "
                 "username=\"broker\" password=\"...\";", ib->name,
                 bk_secproto_name(ib->proto), key, plain ? "org.apache.kafka.common."
                 "security.plain.PlainLoginModule" : "org.apache.kafka.common.security."
                 "scram.ScramLoginModule", "");
        return -1;
    }
    char module[256], inner[200];
    if (bk_jaas_parse(jaas, module, sizeof module, c->ib_sasl_user, sizeof c->ib_sasl_user,
                      c->ib_sasl_password, sizeof c->ib_sasl_password, inner, sizeof inner)) {
        snprintf(err, errlen, "Invalid value for configuration %s: %s", from, inner);
        return -1;
    }
    const char *want = plain ? "org.apache.kafka.common.security.plain.PlainLoginModule"
                             : "org.apache.kafka.common.security.scram.ScramLoginModule";
    if (strcmp(module, want)) {
        snprintf(err, errlen, "Invalid value for configuration %s: login module %s does not "
                 "do %s (expected %s)", from, module, m, want);
        return -1;
    }
    return 0;
}

const bk_listener *bk_config_listener(const bk_config *c, const char *name)
{
    for (int i = 0; i < c->nlisteners; i++)
        if (!strcasecmp(c->listeners[i].name, name))
            return &c->listeners[i];
    return NULL;
}

void bk_config_endpoints(const bk_config *c, char *buf, size_t cap)
{
    size_t at = 0;
    buf[0] = 0;
    for (int i = 0; i < c->nlisteners && at < cap; i++) {
        const bk_listener *l = &c->listeners[i];
        bool v6 = strchr(l->adv_host, ':') != NULL;
        at += (size_t)snprintf(buf + at, cap - at, "%s%s://%s%s%s:%d", i ? "," : "",
                               l->name, v6 ? "[" : "", l->adv_host, v6 ? "]" : "",
                               l->adv_port);
    }
}

void bk_config_protocol_map(const bk_config *c, char *buf, size_t cap)
{
    size_t at = 0;
    buf[0] = 0;
    for (int i = 0; i < c->nlisteners && at < cap; i++)
        at += (size_t)snprintf(buf + at, cap - at, "%s%s:%s", i ? "," : "",
                               c->listeners[i].name,
                               bk_secproto_name(c->listeners[i].proto));
}

int bk_config_finish(bk_config *c, char *err, size_t errlen)
{
    if (c->zookeeper_connect[0] && bk_zk_connect_check(c->zookeeper_connect, err, errlen))
        return -1;
    if (c->zookeeper_connection_timeout_ms <= 0)
        c->zookeeper_connection_timeout_ms = c->zookeeper_session_timeout_ms;
    if (finish_listeners(c, err, errlen) || finish_ssl(c, err, errlen) ||
        finish_inter_broker_sasl(c, err, errlen) || finish_plain_users(c, err, errlen))
        return -1;
    char *comma = strchr(c->log_dirs, ',');
    if (comma)
        *comma = 0;                        /* one log dir for now */
    if (!c->log_dirs[0]) {
        snprintf(err, errlen, "log.dirs is empty");
        return -1;
    }
    return 0;
}

const char *bk_config_render(const bk_config *c, const bk_config_key *k, char *buf,
                             size_t cap)
{
    const char *field = (const char *)c + k->off;
    switch (k->type) {
    case BK_CT_INT:
        if (k->size == sizeof(int16_t))
            snprintf(buf, cap, "%d", *(const int16_t *)(const void *)field);
        else
            snprintf(buf, cap, "%d", *(const int32_t *)(const void *)field);
        return buf;
    case BK_CT_LONG:
        snprintf(buf, cap, "%lld", (long long)*(const int64_t *)(const void *)field);
        return buf;
    case BK_CT_DOUBLE: {
        /* A whole number as one ("50000000", as an operator writes a
         * byte rate), else the shortest text that reads back as the same
         * double (Kafka's unlimited default: 1.7976931348623157e+308). */
        double v = *(const double *)(const void *)field;
        if (v > -9007199254740992.0 && v < 9007199254740992.0 &&
            v == (double)(int64_t)v) {                  /* |v| < 2^53 first */
            snprintf(buf, cap, "%lld", (long long)v);
            return buf;
        }
        for (int prec = 1; prec <= 17; prec++) {
            snprintf(buf, cap, "%.*g", prec, v);
            if (strtod(buf, NULL) == v)
                break;
        }
        return buf;
    }
    case BK_CT_BOOL:
        return *(const bool *)(const void *)field ? "true" : "false";
    case BK_CT_STRING:
        snprintf(buf, cap, "%s", field);
        return buf[0] ? buf : NULL;
    case BK_CT_UNIT:
        snprintf(buf, cap, "%s", field[0] ? field : k->dflt ? k->dflt : "");
        return buf[0] ? buf : NULL;
    case BK_CT_LISTENERS:
    case BK_CT_ADVERTISED:
        snprintf(buf, cap, "%s", field);
        return buf[0] ? buf : NULL;
    }
    return NULL;
}

/* ---- security protocols (broker_config.h) ---------------------------------- */

static const char *const secproto_names[] = {
    [BK_SEC_PLAINTEXT] = "PLAINTEXT", [BK_SEC_SSL] = "SSL",
    [BK_SEC_SASL_PLAINTEXT] = "SASL_PLAINTEXT", [BK_SEC_SASL_SSL] = "SASL_SSL",
};

int bk_secproto_parse(const char *name, bk_secproto *out)
{
    for (size_t i = 0; i < sizeof secproto_names / sizeof *secproto_names; i++)
        if (!strcasecmp(name, secproto_names[i])) {
            *out = (bk_secproto)i;
            return 0;
        }
    return -1;
}

const char *bk_secproto_name(bk_secproto p)
{
    return (unsigned)p < sizeof secproto_names / sizeof *secproto_names
           ? secproto_names[p] : "?";
}

bool bk_secproto_is_sasl(bk_secproto p)
{
    return p == BK_SEC_SASL_PLAINTEXT || p == BK_SEC_SASL_SSL;
}
