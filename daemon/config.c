/*
 * Broker configuration (see config.h).
 *
 * Keys come in two kinds:
 *   1. broker keys handled here (broker.id, listeners, log.dirs, …), each a
 *      row in `keys` with its type and range;
 *   2. topic defaults under their broker names, found through metadata/'s
 *      config definitions (md_config_def_by_broker_key), validated with the
 *      same rules as topic configs and stored by topic-level name.
 * log.retention.{hours,minutes,ms} and log.roll.{hours,ms} follow Kafka's
 * precedence: the finest unit given wins.
 */
#include "daemon/config.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum key_type { K_INT32, K_INT64, K_BOOL, K_STRING, K_LISTENERS, K_ADV, K_DOUBLE };

struct key {
    const char *name;
    enum key_type type;
    size_t off;
    size_t size;                 /* for strings */
    int64_t min, max;
};

#define F(field) offsetof(bk_config, field), sizeof(((bk_config *)0)->field)
static const struct key keys[] = {
    { "broker.id", K_INT32, F(broker_id), 0, INT32_MAX },
    { "listeners", K_LISTENERS, F(listen_host), 0, 0 },
    { "advertised.listeners", K_ADV, F(advertised_host), 0, 0 },
    { "log.dirs", K_STRING, F(log_dirs), 0, 0 },
    { "log.dir", K_STRING, F(log_dirs), 0, 0 },
    { "broker.rack", K_STRING, F(rack), 0, 0 },
    { "num.partitions", K_INT32, F(num_partitions), 1, 100000 },
    { "default.replication.factor", K_INT32, F(default_replication_factor), 1, 32767 },
    { "auto.create.topics.enable", K_BOOL, F(auto_create_topics_enable), 0, 0 },
    { "delete.topic.enable", K_BOOL, F(delete_topic_enable), 0, 0 },
    { "socket.request.max.bytes", K_INT32, F(socket_request_max_bytes), 64, INT32_MAX },
    { "queued.max.request.bytes", K_INT64, F(queued_max_request_bytes), -1, INT64_MAX },
    { "connection.max.queued.bytes", K_INT64, F(connection_max_queued_bytes), 65536, INT64_MAX },
    { "max.connections", K_INT32, F(max_connections), 1, INT32_MAX },
    { "max.connections.per.ip", K_INT32, F(max_connections_per_ip), 1, INT32_MAX },
    { "connections.max.idle.ms", K_INT64, F(connections_max_idle_ms), -1, INT64_MAX },
    { "log.retention.check.interval.ms", K_INT64, F(log_retention_check_interval_ms), 1, INT64_MAX },
    { "log.cleaner.enable", K_BOOL, F(log_cleaner_enable), 0, 0 },
    { "log.cleaner.threads", K_INT32, F(log_cleaner_threads), 1, 64 },
    { "log.cleaner.dedupe.buffer.size", K_INT64, F(log_cleaner_dedupe_buffer_size), 16384, INT64_MAX },
    { "log.cleaner.io.max.bytes.per.second", K_DOUBLE, F(log_cleaner_io_max_bytes_per_second), 0, 0 },
    { "log.cleaner.backoff.ms", K_INT64, F(log_cleaner_backoff_ms), 1, INT64_MAX },
    { "log.flush.scheduler.interval.ms", K_INT64, F(log_flush_scheduler_interval_ms), 1, INT64_MAX },
    { "log.flush.offset.checkpoint.interval.ms", K_INT64, F(log_flush_offset_checkpoint_interval_ms), 1, INT64_MAX },
    { "fetch.max.bytes", K_INT32, F(fetch_max_bytes), 1024, INT32_MAX },
    { "zookeeper.connect", K_STRING, F(zookeeper_connect), 0, 0 },
    { "admin.listeners", K_STRING, F(admin_listeners), 0, 0 },
    { "admin.token", K_STRING, F(admin_token), 0, 0 },
    { "admin.sql.timeout.ms", K_INT64, F(admin_sql_timeout_ms), 1, 3600000 },
    { "admin.sql.max.rows", K_INT64, F(admin_sql_max_rows), 1, INT32_MAX },
    { "group.initial.rebalance.delay.ms", K_INT64, F(group_initial_rebalance_delay_ms), 0, INT32_MAX },
    { "group.min.session.timeout.ms", K_INT32, F(group_min_session_timeout_ms), 1, INT32_MAX },
    { "group.max.session.timeout.ms", K_INT32, F(group_max_session_timeout_ms), 1, INT32_MAX },
    { "offsets.retention.minutes", K_INT64, F(offsets_retention_minutes), 1, INT32_MAX },
    { "offsets.retention.check.interval.ms", K_INT64, F(offsets_retention_check_interval_ms), 1, INT64_MAX },
    { "offset.metadata.max.bytes", K_INT32, F(offset_metadata_max_bytes), 0, INT32_MAX },
    { "offsets.commit.linger.ms", K_INT64, F(offsets_commit_linger_ms), 0, 1000 },
};
#undef F

/* Broker keys that set a topic default in another unit. */
struct unit_key { const char *name; const char *topic_name; int64_t mult; int rank; };
static const struct unit_key unit_keys[] = {
    { "log.retention.hours",   "retention.ms", 3600000, 1 },
    { "log.retention.minutes", "retention.ms", 60000,   2 },
    { "log.retention.ms",      "retention.ms", 1,       3 },
    { "log.roll.hours",        "segment.ms",   3600000, 1 },
    { "log.roll.ms",           "segment.ms",   1,       3 },
    { "log.roll.jitter.hours", "segment.jitter.ms", 3600000, 1 },
    { "log.roll.jitter.ms",    "segment.jitter.ms", 1,  3 },
};

void bk_config_init(bk_config *c)
{
    memset(c, 0, sizeof *c);
    c->broker_id = 0;
    snprintf(c->listen_host, sizeof c->listen_host, "127.0.0.1");
    c->listen_port = 9092;
    snprintf(c->log_dirs, sizeof c->log_dirs, "./data");
    c->num_partitions = 1;
    c->default_replication_factor = 1;
    c->auto_create_topics_enable = true;
    c->delete_topic_enable = true;
    c->socket_request_max_bytes = 104857600;
    c->queued_max_request_bytes = -1;
    c->connection_max_queued_bytes = 64 << 20;
    c->max_connections = 10000;
    c->max_connections_per_ip = 10000;
    c->connections_max_idle_ms = 600000;
    c->log_retention_check_interval_ms = 300000;
    c->log_cleaner_enable = true;
    c->log_cleaner_threads = 1;
    c->log_cleaner_dedupe_buffer_size = 134217728;
    c->log_cleaner_io_max_bytes_per_second = 1.7976931348623157e308;
    c->log_cleaner_backoff_ms = 15000;
    c->log_flush_scheduler_interval_ms = 1000;
    c->log_flush_offset_checkpoint_interval_ms = 60000;
    c->fetch_max_bytes = 57671680;
    c->admin_sql_timeout_ms = 5000;
    c->admin_sql_max_rows = 100000;
    c->group_initial_rebalance_delay_ms = 3000;
    c->group_min_session_timeout_ms = 6000;
    c->group_max_session_timeout_ms = 1800000;
    c->offsets_retention_minutes = 10080;
    c->offsets_retention_check_interval_ms = 600000;
    c->offset_metadata_max_bytes = 4096;
    c->offsets_commit_linger_ms = 5;
}

void bk_config_free(bk_config *c)
{
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
static int parse_listener(const char *v, char *host, size_t hostcap, int *port)
{
    const char *p = strstr(v, "://");
    p = p ? p + 3 : v;
    const char *comma = strchr(p, ',');
    size_t len = comma ? (size_t)(comma - p) : strlen(p);
    const char *colon = NULL;
    for (size_t i = 0; i < len; i++)
        if (p[i] == ':')
            colon = p + i;
    if (!colon)
        return -1;
    size_t hlen = (size_t)(colon - p);
    if (hlen >= hostcap)
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
    memcpy(host, p, hlen);
    host[hlen] = 0;
    if (host[0] == '[') {                     /* [::1] → ::1 */
        memmove(host, host + 1, hlen);
        char *rb = strchr(host, ']');
        if (rb) *rb = 0;
    }
    *port = (int)pv;
    return 0;
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

/* Rank of the unit key that last set a topic default (finest unit wins,
 * whatever the order in the file). */
static int unit_rank[sizeof unit_keys / sizeof unit_keys[0]];

int bk_config_set(bk_config *c, const char *key, const char *value,
                  char *err, size_t errlen)
{
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
        const struct key *k = &keys[i];
        if (strcmp(k->name, key))
            continue;
        char *field = (char *)c + k->off;
        int64_t v;
        bool bv;
        switch (k->type) {
        case K_INT32:
        case K_INT64:
            if (parse_i64(value, &v) || v < k->min || v > k->max) {
                snprintf(err, errlen, "Invalid value %s for configuration %s: "
                         "must be an integer in [%lld, %lld]", value, key,
                         (long long)k->min, (long long)k->max);
                return -1;
            }
            if (k->type == K_INT64)
                *(int64_t *)(void *)field = v;
            else if (k->size == sizeof(int16_t))
                *(int16_t *)(void *)field = (int16_t)v;
            else
                *(int32_t *)(void *)field = (int32_t)v;
            return 0;
        case K_BOOL:
            if (parse_bool(value, &bv)) {
                snprintf(err, errlen, "Invalid value %s for configuration %s: "
                         "must be true or false", value, key);
                return -1;
            }
            *(bool *)(void *)field = bv;
            return 0;
        case K_DOUBLE: {
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
        case K_STRING:
            if (strlen(value) >= k->size) {
                snprintf(err, errlen, "Invalid value for configuration %s: too long", key);
                return -1;
            }
            strcpy(field, value);
            return 0;
        case K_LISTENERS:
            if (parse_listener(value, c->listen_host, sizeof c->listen_host,
                               &c->listen_port)) {
                snprintf(err, errlen, "Invalid value %s for configuration %s: "
                         "expected PLAINTEXT://host:port", value, key);
                return -1;
            }
            return 0;
        case K_ADV:
            if (parse_listener(value, c->advertised_host, sizeof c->advertised_host,
                               &c->advertised_port)) {
                snprintf(err, errlen, "Invalid value %s for configuration %s: "
                         "expected PLAINTEXT://host:port", value, key);
                return -1;
            }
            return 0;
        }
    }
    for (size_t i = 0; i < sizeof unit_keys / sizeof unit_keys[0]; i++) {
        const struct unit_key *u = &unit_keys[i];
        if (strcmp(u->name, key))
            continue;
        int64_t v;
        if (parse_i64(value, &v) || (v < 0 && v != -1) ||
            (v > 0 && v > INT64_MAX / u->mult)) {
            snprintf(err, errlen, "Invalid value %s for configuration %s: "
                     "must be a non-negative integer or -1", value, key);
            return -1;
        }
        int64_t ms = v < 0 ? -1 : v * u->mult;
        char buf[32];
        snprintf(buf, sizeof buf, "%lld", (long long)ms);
        if (md_config_check(u->topic_name, buf, err, errlen) != KP_NONE) {
            char inner[MD_ERRLEN];
            snprintf(inner, sizeof inner, "%s", err);
            snprintf(err, errlen, "Invalid value %s for configuration %s (%s)",
                     value, key, inner);
            return -1;
        }
        /* Finest unit wins: a coarser key never overrides a finer one. */
        int slot = -1;
        for (size_t j = 0; j < sizeof unit_keys / sizeof unit_keys[0]; j++)
            if (!strcmp(unit_keys[j].topic_name, u->topic_name) && unit_keys[j].rank == 3)
                slot = (int)j;
        if (slot >= 0 && unit_rank[slot] > u->rank)
            return 0;
        if (slot >= 0)
            unit_rank[slot] = u->rank;
        kv_put(c, u->topic_name, buf);
        return 0;
    }
    const md_config_def *d = md_config_def_by_broker_key(key);
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
        char *sep = s + strcspn(s, "=:");
        if (!*sep) {
            snprintf(err, errlen, "%s:%d: expected key=value, got \"%s\"", path, lineno, s);
            fclose(f);
            return -1;
        }
        *sep = 0;
        char *key = trim(s), *value = trim(sep + 1);
        char inner[MD_ERRLEN + 64];
        if (bk_config_set(c, key, value, inner, sizeof inner)) {
            snprintf(err, errlen, "%s:%d: %s", path, lineno, inner);
            fclose(f);
            return -1;
        }
    }
    fclose(f);
    return 0;
}

int bk_config_finish(bk_config *c, char *err, size_t errlen)
{
    if (c->zookeeper_connect[0]) {
        snprintf(err, errlen, "zookeeper.connect is set, but cluster mode is not "
                 "built yet: remove it to run standalone");
        return -1;
    }
    if (!c->advertised_host[0]) {
        const char *h = c->listen_host;
        if (!h[0] || !strcmp(h, "0.0.0.0") || !strcmp(h, "::"))
            h = "127.0.0.1";
        snprintf(c->advertised_host, sizeof c->advertised_host, "%s", h);
        c->advertised_port = c->listen_port;
    }
    char *comma = strchr(c->log_dirs, ',');
    if (comma)
        *comma = 0;                        /* one log dir for now */
    if (!c->log_dirs[0]) {
        snprintf(err, errlen, "log.dirs is empty");
        return -1;
    }
    return 0;
}
