/*
 * conf.c — configuration as Kafka property names, parsed once into typed
 * fields of struct sl_conf, and the error names.
 *
 * Design: one table row per key (name, kind, field offset, bounds).  Every
 * value is validated when set, so a handle constructor only checks the
 * cross-field rules (bootstrap.servers present, heartbeat < session).
 * sl_conf_get formats the typed field back, so defaults show through.
 * Invariant: the strings in a conf are owned by it (strdup'd), so a copy
 * is deep and a handle's copy outlives the caller's object.
 */
#include <errno.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <openssl/crypto.h>

#include "clients/sl_int.h"

const char *sl_version(void) { return SL_VERSION_STR; }

char *sl_strdup(const char *s) { return s ? strdup(s) : NULL; }

char *sl_strndup(const char *s, size_t n)
{
    char *d = malloc(n + 1);
    if (d) {
        memcpy(d, s, n);
        d[n] = 0;
    }
    return d;
}

void sl_errbuf(char *buf, size_t size, const char *fmt, ...)
{
    if (!buf || !size)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, size, fmt, ap);
    va_end(ap);
}

const char *sl_err_name(int err)
{
    switch (err) {
    case SL_E_INVALID_ARG:   return "INVALID_ARG";
    case SL_E_TIMED_OUT:     return "TIMED_OUT";
    case SL_E_QUEUE_FULL:    return "QUEUE_FULL";
    case SL_E_NOMEM:         return "NOMEM";
    case SL_E_TRANSPORT:     return "TRANSPORT";
    case SL_E_MSG_TIMED_OUT: return "MSG_TIMED_OUT";
    case SL_E_NO_OFFSET:     return "NO_OFFSET";
    case SL_E_PARTITION_EOF: return "PARTITION_EOF";
    case SL_E_STATE:         return "STATE";
    case SL_E_UNSUPPORTED:   return "UNSUPPORTED";
    case SL_E_CONF:          return "CONF";
    case SL_E_DESTROYED:     return "DESTROYED";
    case SL_E_BAD_MSG:       return "BAD_MSG";
    case SL_E_FATAL:         return "FATAL";
    case SL_E_MAX_POLL_EXCEEDED: return "MAX_POLL_EXCEEDED";
    case SL_E_AUTHENTICATION: return "AUTHENTICATION";
    default:                 return kp_error_name(err);
    }
}

int sl_retriable(int err)
{
    if (err == SL_E_TRANSPORT || err == SL_E_TIMED_OUT)
        return 1;
    return err > 0 && kp_error_retriable(err);
}

/* ---- the table ------------------------------------------------------------ */
enum kind { K_STR, K_INT, K_I64, K_BOOL, K_ACKS, K_ENUM, K_RESET, K_ASSIGNORS };

typedef struct key {
    const char *name;
    enum kind kind;
    size_t off;
    int64_t min, max;
} key;

static const char *const codecs[] = { "none", "gzip", "snappy", "lz4", "zstd" };
static const char *const isolation_levels[] = { "read_uncommitted", "read_committed" };
static const char *const partitioners[] = { "murmur2_random", "murmur2",
                                            "consistent_random", "random" };
static const char *const sec_protocols[] = { "PLAINTEXT", "SSL", "SASL_PLAINTEXT",
                                             "SASL_SSL" };
static const char *const sasl_mechs[] = { "PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512" };
static const char *const endpoint_algs[] = { "none", "https" };

#define F(field) offsetof(sl_conf, field)
#define BIG INT32_MAX
static const key keys[] = {
    { "bootstrap.servers", K_STR, F(bootstrap_servers), 0, 0 },
    { "client.id", K_STR, F(client_id), 0, 0 },
    { "request.timeout.ms", K_INT, F(request_timeout_ms), 1, BIG },
    { "retry.backoff.ms", K_INT, F(retry_backoff_ms), 0, BIG },
    { "reconnect.backoff.ms", K_INT, F(reconnect_backoff_ms), 0, BIG },
    { "reconnect.backoff.max.ms", K_INT, F(reconnect_backoff_max_ms), 0, BIG },
    { "metadata.max.age.ms", K_INT, F(metadata_max_age_ms), 1, BIG },
    { "log_level", K_INT, F(log_level), 0, 7 },
    { "socket.send.buffer.bytes", K_INT, F(socket_send_buffer_bytes), 0, 100000000 },
    { "acks", K_ACKS, F(acks), 0, 0 },
    { "linger.ms", K_INT, F(linger_ms), 0, 900000 },
    { "batch.size", K_INT, F(batch_size), 1, 1 << 30 },
    { "compression.type", K_ENUM, F(codec), 0, 0 },
    { "compression.codec", K_ENUM, F(codec), 0, 0 },
    { "enable.idempotence", K_BOOL, F(enable_idempotence), 0, 1 },
    { "retries", K_INT, F(retries), 0, BIG },
    { "delivery.timeout.ms", K_INT, F(delivery_timeout_ms), 1, BIG },
    { "message.timeout.ms", K_INT, F(delivery_timeout_ms), 1, BIG },
    { "max.in.flight.requests.per.connection", K_INT, F(max_in_flight), 1, 5 },
    { "buffer.memory", K_I64, F(buffer_memory), 1024, INT64_MAX / 2 },
    { "max.block.ms", K_INT, F(max_block_ms), 0, BIG },
    { "partitioner", K_ENUM, F(partitioner), 0, 0 },
    { "group.id", K_STR, F(group_id), 0, 0 },
    { "auto.offset.reset", K_RESET, F(auto_offset_reset), 0, 0 },
    { "enable.auto.commit", K_BOOL, F(enable_auto_commit), 0, 1 },
    { "auto.commit.interval.ms", K_INT, F(auto_commit_interval_ms), 0, BIG },
    { "session.timeout.ms", K_INT, F(session_timeout_ms), 1, BIG },
    { "heartbeat.interval.ms", K_INT, F(heartbeat_interval_ms), 1, BIG },
    { "max.poll.interval.ms", K_INT, F(max_poll_interval_ms), 1, BIG },
    { "partition.assignment.strategy", K_ASSIGNORS, F(assignors), 0, 0 },
    { "fetch.min.bytes", K_INT, F(fetch_min_bytes), 1, BIG },
    { "fetch.max.bytes", K_INT, F(fetch_max_bytes), 1, BIG },
    { "max.partition.fetch.bytes", K_INT, F(max_partition_fetch_bytes), 1, BIG },
    { "fetch.max.wait.ms", K_INT, F(fetch_max_wait_ms), 0, 300000 },
    { "queued.max.messages.kbytes", K_INT, F(queued_max_kbytes), 1, 2097151 },
    { "enable.partition.eof", K_BOOL, F(enable_partition_eof), 0, 1 },
    { "allow.auto.create.topics", K_BOOL, F(allow_auto_create_topics), 0, 1 },
    { "isolation.level", K_ENUM, F(isolation_level), 0, 0 },
    { "security.protocol", K_ENUM, F(security_protocol), 0, 0 },
    { "sasl.mechanism", K_ENUM, F(sasl_mechanism), 0, 0 },
    { "sasl.mechanisms", K_ENUM, F(sasl_mechanism), 0, 0 },
    { "sasl.username", K_STR, F(sasl_username), 0, 0 },
    { "sasl.password", K_STR, F(sasl_password), 0, 0 },
    { "ssl.ca.location", K_STR, F(ssl_ca_location), 0, 0 },
    { "ssl.certificate.location", K_STR, F(ssl_certificate_location), 0, 0 },
    { "ssl.key.location", K_STR, F(ssl_key_location), 0, 0 },
    { "ssl.key.password", K_STR, F(ssl_key_password), 0, 0 },
    { "ssl.endpoint.identification.algorithm", K_ENUM, F(ssl_endpoint_identification), 0, 0 },
};

/* The K_ENUM keys' values, by the int they set (by field: aliases share it). */
static const struct {
    size_t off;
    const char *const *names;
    int n;
} enums[] = {
#define E(field, names) { F(field), names, sizeof names / sizeof names[0] }
    E(codec, codecs), E(partitioner, partitioners), E(isolation_level, isolation_levels),
    E(security_protocol, sec_protocols), E(sasl_mechanism, sasl_mechs),
    E(ssl_endpoint_identification, endpoint_algs),
#undef E
};

static const char *const *enum_names(const key *k, int *n)
{
    for (size_t i = 0; i < sizeof enums / sizeof enums[0]; i++)
        if (enums[i].off == k->off) {
            *n = enums[i].n;
            return enums[i].names;
        }
    *n = 0;
    return NULL;
}


void sl_conf_init_defaults(sl_conf *c)
{
    memset(c, 0, sizeof *c);
    c->client_id = strdup("sluice");
    c->request_timeout_ms = 30000;
    c->retry_backoff_ms = 100;
    c->reconnect_backoff_ms = 100;
    c->reconnect_backoff_max_ms = 10000;
    c->metadata_max_age_ms = 300000;
    c->log_level = 6;
    c->acks = -1;
    c->linger_ms = 5;
    c->batch_size = 1000000;
    c->codec = KP_CODEC_NONE;
    c->enable_idempotence = 1;
    c->retries = INT32_MAX;
    c->delivery_timeout_ms = 120000;
    c->max_in_flight = 5;
    c->buffer_memory = (int64_t)256 << 20;
    c->max_block_ms = 60000;
    c->partitioner = SL_PART_MURMUR2_RANDOM;
    c->auto_offset_reset = SL_OFFSET_END;
    c->enable_auto_commit = 1;
    c->auto_commit_interval_ms = 5000;
    c->session_timeout_ms = 45000;
    c->heartbeat_interval_ms = 3000;
    c->max_poll_interval_ms = 300000;
    c->assignors[0] = SL_ASSIGN_RANGE;
    c->assignors[1] = SL_ASSIGN_ROUNDROBIN;
    c->n_assignors = 2;
    c->fetch_min_bytes = 1;
    c->fetch_max_bytes = 52428800;
    c->max_partition_fetch_bytes = 1048576;
    c->fetch_max_wait_ms = 500;
    c->queued_max_kbytes = 65536;
    c->ssl_endpoint_identification = 1;     /* librdkafka 2.x: https */
}

sl_conf *sl_conf_new(void)
{
    sl_conf *c = malloc(sizeof *c);
    if (c)
        sl_conf_init_defaults(c);
    return c;
}

/* Frees a string property's value, wiping it first when it is a secret. */
static void conf_str_free(const char *name, char *v)
{
    if (v && (!strcmp(name, "sasl.password") || !strcmp(name, "ssl.key.password")))
        OPENSSL_cleanse(v, strlen(v));
    free(v);
}

void sl_conf_free_fields(sl_conf *c)
{
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
        if (keys[i].kind != K_STR)
            continue;
        char **slot = (char **)((char *)c + keys[i].off);
        conf_str_free(keys[i].name, *slot);
        *slot = NULL;
    }
}

void sl_conf_destroy(sl_conf *c)
{
    if (!c)
        return;
    sl_conf_free_fields(c);
    free(c);
}

int sl_conf_copy(sl_conf *dst, const sl_conf *src)
{
    *dst = *src;
    int rc = 0;
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
        if (keys[i].kind != K_STR)
            continue;
        char **slot = (char **)((char *)dst + keys[i].off);
        if (*slot && !(*slot = strdup(*slot)))
            rc = SL_E_NOMEM;
    }
    if (rc)
        sl_conf_free_fields(dst);   /* frees the copies; NULL ones are the failures */
    return rc;
}

sl_conf *sl_conf_dup(const sl_conf *conf)
{
    sl_conf *c = malloc(sizeof *c);
    if (c && sl_conf_copy(c, conf) != 0) {
        free(c);
        c = NULL;
    }
    return c;
}

static int pick(const char *v, const char *const *names, int n)
{
    for (int i = 0; i < n; i++)
        if (strcasecmp(v, names[i]) == 0)
            return i;
    return -1;
}

static int parse_i64(const char *v, int64_t *out)
{
    char *end;
    errno = 0;
    long long x = strtoll(v, &end, 10);
    if (errno || end == v || *end)
        return -1;
    *out = x;
    return 0;
}

static int parse_bool(const char *v)
{
    if (!strcasecmp(v, "true") || !strcmp(v, "1"))
        return 1;
    if (!strcasecmp(v, "false") || !strcmp(v, "0"))
        return 0;
    return -1;
}

#define BAD(...) do { sl_errbuf(errbuf, size, __VA_ARGS__); return SL_E_CONF; } while (0)

int sl_conf_set(sl_conf *conf, const char *name, const char *v,
                char *errbuf, size_t size)
{
    if (!conf || !name || !v)
        BAD("sl_conf_set: NULL argument");
    const key *k = NULL;
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++)
        if (strcmp(keys[i].name, name) == 0)
            k = &keys[i];
    if (!k)
        BAD("unknown configuration property \"%s\"", name);
    char *base = (char *)conf;
    int64_t x;
    int i;
    switch (k->kind) {
    case K_STR: {
        char **slot = (char **)(base + k->off);
        if (!strcmp(name, "bootstrap.servers") && !*v)
            BAD("bootstrap.servers: empty value");
        char *d = strdup(v);
        if (!d)
            BAD("%s: out of memory", name);
        conf_str_free(name, *slot);
        *slot = d;
        return 0;
    }
    case K_INT:
    case K_I64:
        if (parse_i64(v, &x) || x < k->min || x > k->max)
            BAD("%s: invalid value \"%s\" (expected an integer in %lld..%lld)",
                name, v, (long long)k->min, (long long)k->max);
        if (k->kind == K_INT)
            *(int *)(base + k->off) = (int)x;
        else
            *(int64_t *)(base + k->off) = x;
        return 0;
    case K_BOOL:
        if ((i = parse_bool(v)) < 0)
            BAD("%s: invalid value \"%s\" (expected true or false)", name, v);
        *(int *)(base + k->off) = i;
        return 0;
    case K_ACKS:
        if (!strcasecmp(v, "all") || !strcmp(v, "-1"))
            conf->acks = -1;
        else if (!strcmp(v, "0") || !strcmp(v, "1"))
            conf->acks = v[0] - '0';
        else
            BAD("acks: invalid value \"%s\" (expected all, -1, 0 or 1)", v);
        return 0;
    case K_ENUM: {
        int n;
        const char *const *names = enum_names(k, &n);
        if ((i = pick(v, names, n)) < 0) {
            char list[200];
            size_t at = 0;
            for (int j = 0; j < n && at < sizeof list; j++)
                at += (size_t)snprintf(list + at, sizeof list - at, "%s%s",
                                       j == 0 ? "" : j == n - 1 ? " or " : ", ", names[j]);
            BAD("%s: invalid value \"%s\" (expected %s)", name, v, list);
        }
        *(int *)(base + k->off) = i;
        return 0;
    }
    case K_RESET:
        if (!strcasecmp(v, "earliest") || !strcasecmp(v, "smallest") ||
            !strcasecmp(v, "beginning"))
            conf->auto_offset_reset = SL_OFFSET_BEGINNING;
        else if (!strcasecmp(v, "latest") || !strcasecmp(v, "largest") ||
                 !strcasecmp(v, "end"))
            conf->auto_offset_reset = SL_OFFSET_END;
        else if (!strcasecmp(v, "none") || !strcasecmp(v, "error"))
            conf->auto_offset_reset = SL_OFFSET_INVALID;
        else
            BAD("auto.offset.reset: invalid value \"%s\" (expected earliest, "
                "latest or none)", v);
        return 0;
    case K_ASSIGNORS: {
        int got[2], n = 0;
        const char *p = v;
        while (*p) {
            size_t len = strcspn(p, ",");
            const char *s = p;
            size_t sl = len;
            while (sl && *s == ' ') { s++; sl--; }
            while (sl && s[sl - 1] == ' ') sl--;
            int a = (sl == 5 && !strncasecmp(s, "range", 5)) ? SL_ASSIGN_RANGE
                  : (sl == 10 && !strncasecmp(s, "roundrobin", 10)) ? SL_ASSIGN_ROUNDROBIN
                  : 0;
            if (!a || n == 2 || (n == 1 && got[0] == a))
                BAD("partition.assignment.strategy: invalid value \"%s\" (expected "
                    "a list of range, roundrobin)", v);
            got[n++] = a;
            p += len;
            if (*p == ',')
                p++;
        }
        if (n == 0)
            BAD("partition.assignment.strategy: empty value");
        memcpy(conf->assignors, got, sizeof got);
        conf->n_assignors = n;
        return 0;
    }
    }
    BAD("%s: unhandled", name);
}

int sl_conf_get(const sl_conf *conf, const char *name, char *buf, size_t size)
{
    const key *k = NULL;
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++)
        if (strcmp(keys[i].name, name) == 0)
            k = &keys[i];
    if (!k || !buf || !size)
        return SL_E_CONF;
    const char *base = (const char *)conf;
    switch (k->kind) {
    case K_STR: {
        const char *s = *(char *const *)(base + k->off);
        snprintf(buf, size, "%s", s ? s : "");
        break;
    }
    case K_INT:  snprintf(buf, size, "%d", *(const int *)(base + k->off)); break;
    case K_I64:  snprintf(buf, size, "%lld", (long long)*(const int64_t *)(base + k->off)); break;
    case K_BOOL: snprintf(buf, size, "%s", *(const int *)(base + k->off) ? "true" : "false"); break;
    case K_ACKS: snprintf(buf, size, "%s", conf->acks == -1 ? "all" : conf->acks ? "1" : "0"); break;
    case K_ENUM: {
        int n;
        snprintf(buf, size, "%s", enum_names(k, &n)[*(const int *)(base + k->off)]);
        break;
    }
    case K_RESET:
        snprintf(buf, size, "%s", conf->auto_offset_reset == SL_OFFSET_BEGINNING ? "earliest"
                 : conf->auto_offset_reset == SL_OFFSET_END ? "latest" : "none");
        break;
    case K_ASSIGNORS:
        snprintf(buf, size, "%s%s%s",
                 conf->assignors[0] == SL_ASSIGN_RANGE ? "range" : "roundrobin",
                 conf->n_assignors > 1 ? "," : "",
                 conf->n_assignors > 1 ? (conf->assignors[1] == SL_ASSIGN_RANGE
                                          ? "range" : "roundrobin") : "");
        break;
    }
    return 0;
}

void sl_conf_set_opaque(sl_conf *c, void *o) { c->opaque = o; }
void sl_conf_set_log_cb(sl_conf *c, void (*cb)(int, const char *, void *)) { c->log_cb = cb; }
void sl_conf_set_delivery_cb(sl_conf *c, void (*cb)(const sl_delivery *, void *)) { c->dr_cb = cb; }
void sl_conf_set_rebalance_cb(sl_conf *c,
                              void (*cb)(sl_consumer *, int, const sl_topic_partition *,
                                         int, void *))
{
    c->rebalance_cb = cb;
}
void sl_conf_set_commit_cb(sl_conf *c,
                           void (*cb)(sl_consumer *, int, const sl_topic_partition *,
                                      int, void *))
{
    c->commit_cb = cb;
}
