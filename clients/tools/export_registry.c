/*
 * export_registry.c — schema ids to writer schemas for sluice-export (see
 * export_registry.h).  The registry is asked once per id with a blocking
 * HTTP/1.1 GET (Connection: close, 10 s socket timeouts) on the worker's
 * own thread; a connection error or a 5xx is tried 3 times, 1 s apart,
 * then reported (the run fails: a record must not land in the envelope
 * because the registry was down, or a rerun would write it differently).
 * A 404 (no such id) or a schema that is not Avro is remembered as
 * "envelope".  A body is checked by walking it along the schema without
 * decoding into memory (ex_reg_skip): it decodes when the walk ends exactly
 * at its last byte.  (Avro C's avro_value_read leaks the buffer of a string
 * cut short, and allocates for every string: not used.)
 */
#include <errno.h>
#include <stdbool.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <jansson.h>

#include "clients/tools/export_registry.h"

#define REG_TRIES 3
#define REG_MAX_REPLY (8 << 20)

typedef struct reg_entry {
    int32_t id;
    int avro;                 /* 0: envelope (unknown id, not an Avro schema) */
    avro_schema_t schema;
} reg_entry;

struct ex_registry {
    char host[256], port[16], path[512];
    char auth[512];           /* "Basic …" or "" */
    reg_entry *e;
    int n, last;
};

static void ex_reg_base64(const char *in, char *out, size_t size)
{
    static const char tab[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    size_t len = strlen(in), o = 0;
    for (size_t i = 0; i < len && o + 5 < size; i += 3) {
        uint32_t v = (uint32_t)(unsigned char)in[i] << 16;
        if (i + 1 < len)
            v |= (uint32_t)(unsigned char)in[i + 1] << 8;
        if (i + 2 < len)
            v |= (unsigned char)in[i + 2];
        out[o++] = tab[v >> 18 & 63];
        out[o++] = tab[v >> 12 & 63];
        out[o++] = i + 1 < len ? tab[v >> 6 & 63] : '=';
        out[o++] = i + 2 < len ? tab[v & 63] : '=';
    }
    out[o] = 0;
}

ex_registry *ex_reg_new(const char *url, const char *user, char *err, size_t es)
{
    const char *p = url;
    if (strncmp(p, "http://", 7) != 0) {
        snprintf(err, es, "--schema-registry: \"%s\" is not an http:// URL", url);
        return NULL;
    }
    p += 7;
    size_t hl = strcspn(p, ":/");
    if (hl == 0 || hl >= 256 || p[hl] != ':') {
        snprintf(err, es, "--schema-registry: \"%s\" wants http://HOST:PORT[/PATH]", url);
        return NULL;
    }
    ex_registry *r = calloc(1, sizeof *r);
    if (!r) {
        snprintf(err, es, "out of memory");
        return NULL;
    }
    memcpy(r->host, p, hl);
    p += hl + 1;
    size_t pl = strcspn(p, "/");
    snprintf(r->port, sizeof r->port, "%.*s", (int)(pl < 15 ? pl : 15), p);
    snprintf(r->path, sizeof r->path, "%s", p + pl);
    size_t tl = strlen(r->path);
    if (tl && r->path[tl - 1] == '/')
        r->path[tl - 1] = 0;
    if (user) {
        char b64[400];
        ex_reg_base64(user, b64, sizeof b64);
        snprintf(r->auth, sizeof r->auth, "Authorization: Basic %s\r\n", b64);
    }
    r->last = -1;
    return r;
}

void ex_reg_free(ex_registry *r)
{
    if (!r)
        return;
    for (int i = 0; i < r->n; i++)
        if (r->e[i].avro)
            avro_schema_decref(r->e[i].schema);
    free(r->e);
    free(r);
}

/* One GET: the status (0: no answer) and the body (malloc'ed, NUL-ended). */
static int ex_reg_get(ex_registry *r, const char *path, char **body, char *err, size_t es)
{
    struct addrinfo hints = { .ai_socktype = SOCK_STREAM }, *ai = NULL;
    int gai = getaddrinfo(r->host, r->port, &hints, &ai);
    if (gai != 0) {
        snprintf(err, es, "%s:%s: %s", r->host, r->port, gai_strerror(gai));
        return 0;
    }
    int fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct timeval tv = { .tv_sec = 10 };
    if (fd >= 0) {
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    }
    if (fd < 0 || connect(fd, ai->ai_addr, ai->ai_addrlen) != 0) {
        snprintf(err, es, "connecting to %s:%s: %s", r->host, r->port, strerror(errno));
        freeaddrinfo(ai);
        if (fd >= 0)
            close(fd);
        return 0;
    }
    freeaddrinfo(ai);
    char req[2048];
    int rl = snprintf(req, sizeof req, "GET %s%s HTTP/1.1\r\nHost: %s:%s\r\n%sAccept: "
                      "application/vnd.schemaregistry.v1+json\r\nConnection: close\r\n\r\n",
                      r->path, path, r->host, r->port, r->auth);
    size_t cap = 65536, len = 0;
    char *buf = malloc(cap);
    ssize_t k = buf && send(fd, req, (size_t)rl, MSG_NOSIGNAL) == rl ? 1 : -1;
    while (k > 0) {
        char *grown = len + 1 == cap && cap < REG_MAX_REPLY ? realloc(buf, cap * 2) : buf;
        if (len + 1 == cap && grown == buf)
            break;                                        /* too long, or out of memory */
        if (grown != buf)
            cap *= 2;
        buf = grown;
        k = recv(fd, buf + len, cap - len - 1, 0);
        if (k > 0)
            len += (size_t)k;
    }
    int e = errno;
    close(fd);
    int status = 0;
    char *hdr_end = buf && k == 0 ? (buf[len] = 0, strstr(buf, "\r\n\r\n")) : NULL;
    if (!hdr_end || sscanf(buf, "HTTP/1.%*d %d", &status) != 1) {
        snprintf(err, es, "GET %s from %s:%s: %s", path, r->host, r->port,
                 k < 0 ? strerror(e) : "no HTTP answer");
        free(buf);
        return 0;
    }
    memmove(buf, hdr_end + 4, len - (size_t)(hdr_end + 4 - buf) + 1);
    *body = buf;
    return status;
}

/* The entry of id, fetched and parsed the first time; NULL when the
 * registry could not be asked. */
static reg_entry *ex_reg_entry(ex_registry *r, int32_t id, char *err, size_t es)
{
    if (r->last >= 0 && r->e[r->last].id == id)
        return &r->e[r->last];
    for (int i = 0; i < r->n; i++)
        if (r->e[i].id == id)
            return &r->e[r->last = i];
    char path[64], *body = NULL;
    snprintf(path, sizeof path, "/schemas/ids/%d", id);
    int status = 0;
    for (int t = 0; t < REG_TRIES && (status == 0 || status >= 500); t++) {
        if (t)
            sleep(1);
        free(body);
        body = NULL;
        status = ex_reg_get(r, path, &body, err, es);
        if (status >= 500)
            snprintf(err, es, "GET %s: HTTP %d: %.200s", path, status, body);
    }
    if (status != 200 && status != 404) {
        if (status)
            snprintf(err, es, "GET %s: HTTP %d: %.200s", path, status, body);
        free(body);
        return NULL;
    }
    reg_entry *grown = realloc(r->e, sizeof *grown * (size_t)(r->n + 1));
    if (!grown) {
        free(body);
        snprintf(err, es, "out of memory");
        return NULL;
    }
    r->e = grown;
    reg_entry *x = &r->e[r->n];
    memset(x, 0, sizeof *x);
    x->id = id;
    json_t *root = status == 200 ? json_loads(body, 0, NULL) : NULL;
    const char *type = json_string_value(json_object_get(root, "schemaType"));
    json_t *js = json_object_get(root, "schema");
    if (json_is_string(js) && (!type || !strcmp(type, "AVRO")) &&
        avro_schema_from_json_length(json_string_value(js), json_string_length(js),
                                     &x->schema) == 0)
        x->avro = 1;
    json_decref(root);
    free(body);
    return &r->e[r->last = r->n++];
}

/* A zigzag varint (a long) from [*p, end); 0 or -1. */
static int ex_reg_varint(const unsigned char **p, const unsigned char *end, int64_t *out)
{
    uint64_t v = 0;
    for (int shift = 0; *p < end && shift < 64; shift += 7) {
        unsigned char b = *(*p)++;
        v |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80)) {
            *out = (int64_t)(v >> 1) ^ -(int64_t)(v & 1);
            return 0;
        }
    }
    return -1;
}

/* A length (string, bytes) and its bytes; 0 or -1. */
static int ex_reg_take(const unsigned char **p, const unsigned char *end, int64_t n)
{
    if (n < 0 || n > end - *p)
        return -1;
    *p += n;
    return 0;
}

/* Moves *p past one datum of schema s: 0, or -1 when [*p, end) does not
 * begin with one (too short, a union branch or enum symbol out of range, a
 * negative length, a boolean not 0 or 1, nesting deeper than 64). */
static int ex_reg_skip(avro_schema_t s, const unsigned char **p, const unsigned char *end,
                       int depth)
{
    int64_t n, len;
    if (depth > 64)
        return -1;
    switch (avro_typeof(s)) {
    case AVRO_NULL:
        return 0;
    case AVRO_BOOLEAN:
        if (*p >= end || **p > 1)
            return -1;
        (*p)++;
        return 0;
    case AVRO_INT32:
    case AVRO_INT64:
        return ex_reg_varint(p, end, &n);
    case AVRO_FLOAT:
        return ex_reg_take(p, end, 4);
    case AVRO_DOUBLE:
        return ex_reg_take(p, end, 8);
    case AVRO_STRING:
    case AVRO_BYTES:
        return ex_reg_varint(p, end, &n) ? -1 : ex_reg_take(p, end, n);
    case AVRO_FIXED:
        return ex_reg_take(p, end, avro_schema_fixed_size(s));
    case AVRO_ENUM:
        return ex_reg_varint(p, end, &n) || n < 0 ||
               n >= avro_schema_enum_number_of_symbols(s) ? -1 : 0;
    case AVRO_RECORD:
        for (size_t i = 0; i < avro_schema_record_size(s); i++)
            if (ex_reg_skip(avro_schema_record_field_get_by_index(s, (int)i), p, end,
                            depth + 1))
                return -1;
        return 0;
    case AVRO_UNION:
        if (ex_reg_varint(p, end, &n) || n < 0 || (uint64_t)n >= avro_schema_union_size(s))
            return -1;
        return ex_reg_skip(avro_schema_union_branch(s, (int)n), p, end, depth + 1);
    case AVRO_ARRAY:
    case AVRO_MAP: {
        bool map = avro_typeof(s) == AVRO_MAP;
        avro_schema_t item = map ? avro_schema_map_values(s) : avro_schema_array_items(s);
        for (;;) {                                        /* blocks, then a 0 count */
            if (ex_reg_varint(p, end, &n))
                return -1;
            if (n == 0)
                return 0;
            if (n < 0 && (n == INT64_MIN || ex_reg_varint(p, end, &len)))
                return -1;                                /* -count, then a byte size */
            n = n < 0 ? -n : n;
            for (int64_t i = 0; i < n; i++) {
                const unsigned char *at = *p;
                if ((map && (ex_reg_varint(p, end, &len) || ex_reg_take(p, end, len))) ||
                    ex_reg_skip(item, p, end, depth + 1))
                    return -1;
                if (*p == at)
                    break;           /* items of no bytes (null): all the same, done */
            }
        }
    }
    case AVRO_LINK:
        return ex_reg_skip(avro_schema_link_target(s), p, end, depth + 1);
    default:
        return -1;
    }
}

int64_t ex_reg_classify(ex_registry *r, const void *value, int32_t len,
                        avro_schema_t *schema, const char **body, int32_t *body_len,
                        char *err, size_t es)
{
    const unsigned char *v = value;
    if (!v || len < 5 || v[0] != 0)
        return EX_REG_ENVELOPE;
    int32_t id = (int32_t)((uint32_t)v[1] << 24 | (uint32_t)v[2] << 16 |
                           (uint32_t)v[3] << 8 | v[4]);
    if (id < 0)
        return EX_REG_ENVELOPE;
    reg_entry *x = ex_reg_entry(r, id, err, es);
    if (!x)
        return EX_REG_ERROR;
    if (!x->avro)
        return EX_REG_ENVELOPE;
    const unsigned char *p = v + 5, *end = v + len;
    if (ex_reg_skip(x->schema, &p, end, 0) != 0 || p != end)
        return EX_REG_ENVELOPE;
    *schema = x->schema;
    *body = (const char *)v + 5;
    *body_len = len - 5;
    return id;
}
