/*
 * daemon/registry/sr_sql.c — the registry's writes for SQL (issue 31:
 * INSERT INTO subjects, DELETE FROM subjects; admin/sql_worker.c calls
 * these on the loop thread).
 *
 * A write through SQL is the REST request a client would send — POST
 * /subjects/{s}/versions, DELETE /subjects/{s}[/versions/{v}][?permanent=true],
 * PUT or DELETE /config/{s} and /mode/{s} — sent to this broker's own registry listener over loopback.  It then
 * takes every step a client's request takes, and no second copy of any of
 * them exists: the checks and Confluent's answers (sr_api.c), the queue
 * behind the write in flight (sr_log.c R1), the forward to the leader of
 * _schemas in cluster mode (sr_forward.c), the answer once durable.
 *
 *     sr_sql_register / sr_sql_delete ── HTTP ──► on_request (sr_http.c)
 *            │                                          │ sr_api_serve …
 *            ▼                                          ▼
 *     call_answered ◄──── status, Confluent's {"error_code", "message"}
 *            │
 *            ▼ done(arg, status, code, message), unless cancelled
 *
 * (the request carries SR_SQL_HEADER, Q3, and the SQL client's
 * Authorization for a forward, Q4)
 *
 * Invariants:
 *   Q1. A call is on r->sql_calls from its start until its answer (or
 *       sr_stop) frees it; done runs at most once, on a later loop turn,
 *       never after sr_sql_cancel.  libevent may answer inside
 *       evhttp_make_request (socket() failing, EMFILE): that answer is
 *       kept in the call and delivered on the next loop turn (c->later),
 *       after its caller has the call in hand.
 *   Q2. Only plain http:// listeners are called (the client side of TLS is
 *       not here, as in sr_forward.c), on the listening socket's own
 *       numeric address (net_http.h addr; a wildcard bind: its loopback),
 *       never a host name: no lookup blocks the loop, and no DNS answer
 *       can send the secret elsewhere.
 *
 *   Q3. Who: with an authorizer the registry checks the SQL statement's
 *       principal (admin/admin_http.c authenticated it) on SUBJECT ACLs,
 *       in sr_api.c, exactly as its REST request: WRITE to register,
 *       DELETE to delete, ALTER_CONFIGS for a level or mode.  The call
 *       names it in SR_SQL_HEADER, "<secret> <host> [<principal>]" (no
 *       principal: may do all, the admin.token or socket), the secret 32
 *       bytes from getrandom drawn at start: a network client cannot know
 *       it, so a header without it is a forgery (401, sr_auth.c).  The
 *       secret is never logged and never leaves the host: the call goes to
 *       this process on loopback (Q2) and sr_forward.c copies only named
 *       headers, not this one.
 *   Q4. On a follower the write is forwarded to the _schemas leader as a
 *       REST write is: with the SQL client's own Authorization (Basic, the
 *       token), which the leader authenticates and checks again — this
 *       broker's secret means nothing there, and forwarding as the
 *       inter-broker principal would send that principal's password over
 *       plain http and let the leader check a super-user instead of the
 *       SQL user.  A SQL client with no Authorization to forward (a TLS
 *       certificate, the admin socket) is refused on the follower, naming
 *       the leader to run it on (sr_forward.c); so is one with an
 *       Authorization when the leader's registry is plain http: the SQL
 *       client's password or admin.token is never sent in clear, even
 *       when the client used an https admin listener.
 */
#include "daemon/registry/sr_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include <openssl/crypto.h>

#include <event2/buffer.h>
#include <event2/event.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>

/* Longer than a write's worst path, so a statement does not fail while its
 * write goes on (a retry would then take a DELETE a step further): the
 * queue behind the write in flight, a DescribeConfigs (15 s) and the
 * forward (15 s, sr_forward.c). */
#define SR_SQL_TIMEOUT_S 90

struct sr_sql_call {
    sr_sql_call *next;                /* r->sql_calls */
    sr_registry *r;
    sr_sql_done done;                 /* NULL: cancelled */
    void *arg;
    /* Q1: libevent may call back inside evhttp_make_request (a socket()
     * failure); that answer is kept here and delivered by later. */
    bool sending, answered;
    int status, code;
    char msg[1024];
    struct event *later;
};

static void call_free(sr_sql_call *c)
{
    if (c->later)
        event_free(c->later);
    free(c);
}

static void call_unlink(sr_sql_call *c)
{
    for (sr_sql_call **pp = &c->r->sql_calls; *pp; pp = &(*pp)->next)
        if (*pp == c) {
            *pp = c->next;
            break;
        }
}

/* Q1: c's answer to its caller, then c freed. */
static void call_deliver(sr_sql_call *c)
{
    call_unlink(c);
    if (c->done)
        c->done(c->arg, c->status, c->code, c->msg);
    call_free(c);
}

static void call_later(evutil_socket_t fd, short what, void *arg)
{
    (void)fd; (void)what;
    call_deliver(arg);
}

static void call_answered(struct evhttp_request *req, void *arg)
{
    sr_sql_call *c = arg;
    int status = req ? evhttp_request_get_response_code(req) : 0;
    c->status = status;
    c->msg[0] = 0;
    if (status <= 0) {
        snprintf(c->msg, sizeof c->msg, "the schema registry did not answer");
        c->code = 50003;
    } else if (status != 200) {
        struct evbuffer *in = evhttp_request_get_input_buffer(req);
        size_t len = evbuffer_get_length(in);
        json_t *j = json_loadb((const char *)evbuffer_pullup(in, -1), len, 0, NULL);
        const char *m = json_string_value(json_object_get(j, "message"));
        c->code = (int)json_integer_value(json_object_get(j, "error_code"));
        snprintf(c->msg, sizeof c->msg, "%s", m ? m : "the schema registry refused the write");
        json_decref(j);
    }
    c->answered = true;
    if (!c->sending)                  /* else call_start delivers it later */
        call_deliver(c);
}

/* Q2: where this broker's own registry is called. */
static const char *self_host(const sr_registry *r)
{
    if (!r->self_host[0] || !strcmp(r->self_host, "0.0.0.0"))
        return "127.0.0.1";
    if (!strcmp(r->self_host, "::"))
        return "::1";
    return r->self_host;
}

/* Q3: names from's principal (and host) with the secret; -1: a principal
 * or host no header can carry. */
static int call_who(const sr_registry *r, const sr_sql_from *from, struct evkeyvalq *h)
{
    const char *host = from->host && from->host[0] && !strchr(from->host, ' ') &&
                       strlen(from->host) < SR_HOST_MAX ? from->host : "-";
    size_t n = SR_SQL_SECRET_HEX + strlen(host) + (from->principal ? strlen(from->principal) : 0)
               + 3;
    char *v = malloc(n);
    if (!v)
        return -1;
    snprintf(v, n, "%s %s%s%s", r->sql_secret, host, from->principal ? " " : "",
             from->principal ? from->principal : "");
    int rc = evhttp_add_header(h, SR_SQL_HEADER, v);
    OPENSSL_cleanse(v, n);
    free(v);
    if (rc == 0 && from->authorization)             /* Q4 */
        rc = evhttp_add_header(h, "Authorization", from->authorization);
    return rc;
}

/* Sends method path (body NULL: none) to the registry's own listener. */
static sr_sql_call *call_start(bk_broker *b, const sr_sql_from *from,
                               enum evhttp_cmd_type method, const char *path, const char *body,
                               sr_sql_done done, void *arg, char *err, size_t errlen)
{
    sr_registry *r = b->registry;
    if (!r) {
        snprintf(err, errlen, "the schema registry is not running on this broker "
                 "(schema.registry.listeners)");
        return NULL;
    }
    if (r->self_https) {
        snprintf(err, errlen, "the schema registry listens on https only: register and "
                 "delete through its REST API");
        return NULL;
    }
    if (!r->self_conn) {
        r->self_conn = evhttp_connection_base_new(b->base, NULL, self_host(r),
                                                  (ev_uint16_t)r->self_port);
        if (r->self_conn)
            evhttp_connection_set_timeout(r->self_conn, SR_SQL_TIMEOUT_S);
    }
    sr_sql_call *c = r->self_conn ? calloc(1, sizeof *c) : NULL;
    struct evhttp_request *req = c ? evhttp_request_new(call_answered, c) : NULL;
    if (!req) {
        free(c);
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    *c = (sr_sql_call){ .next = r->sql_calls, .r = r, .done = done, .arg = arg,
                        .later = event_new(b->base, -1, 0, call_later, c) };
    if (!c->later) {
        evhttp_request_free(req);
        free(c);
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    struct evkeyvalq *h = evhttp_request_get_output_headers(req);
    if (call_who(r, from, h) != 0) {
        evhttp_request_free(req);
        call_free(c);
        snprintf(err, errlen, "this principal cannot be named to the schema registry (a "
                 "line break in its name?)");
        return NULL;
    }
    char host[300];
    bool v6 = strchr(self_host(r), ':') != NULL;
    snprintf(host, sizeof host, "%s%s%s:%d", v6 ? "[" : "", self_host(r), v6 ? "]" : "",
             r->self_port);
    evhttp_add_header(h, "Host", host);
    evhttp_add_header(h, "Content-Type", "application/vnd.schemaregistry.v1+json");
    if (body)
        evbuffer_add(evhttp_request_get_output_buffer(req), body, strlen(body));
    r->sql_calls = c;                 /* Q1: before the send, which may answer it */
    c->sending = true;
    int rc = evhttp_make_request(r->self_conn, req, method, path);
    c->sending = false;
    if (rc != 0) {                    /* req is freed by libevent on failure */
        call_unlink(c);
        call_free(c);
        snprintf(err, errlen, "cannot reach the schema registry's listener");
        return NULL;
    }
    if (c->answered)                  /* during the send: on the next loop turn */
        event_active(c->later, EV_TIMEOUT, 0);
    return c;
}

/* A subject is named: "" would make the path "/subjects//versions", which
 * names no subject. */
static bool subject_named(const char *subject, char *err, size_t errlen)
{
    if (subject && subject[0])
        return true;
    snprintf(err, errlen, "subjects.subject must be a subject's name, not empty or NULL");
    return false;
}

/* "<top>/{s}<rest>", the subject URI-encoded; NULL: no memory. */
static char *subject_path(const char *top, const char *subject, const char *rest)
{
    char *enc = evhttp_uriencode(subject, -1, 0);
    size_t n = enc ? strlen(top) + strlen(enc) + strlen(rest) + 2 : 0;
    char *p = enc ? malloc(n) : NULL;
    if (p)
        snprintf(p, n, "%s/%s%s", top, enc, rest);
    free(enc);
    return p;
}

/* Sends (method, path, body), all three taken (NULL path: out of memory). */
static sr_sql_call *call_taking(bk_broker *b, const sr_sql_from *from,
                                enum evhttp_cmd_type method, char *path, char *body,
                                bool has_body, sr_sql_done done, void *arg, char *err,
                                size_t errlen)
{
    sr_sql_call *c = NULL;
    if (!path || (has_body && !body))
        snprintf(err, errlen, "out of memory");
    else
        c = call_start(b, from, method, path, body, done, arg, err, errlen);
    free(path);
    free(body);
    return c;
}

sr_sql_call *sr_sql_register(bk_broker *b, const sr_sql_from *from, const char *subject,
                             const char *schema, const char *type, const char *refs,
                             sr_sql_done done, void *arg, char *err, size_t errlen)
{
    if (!subject_named(subject, err, errlen))
        return NULL;
    json_error_t je;
    json_t *jr = refs ? json_loads(refs, 0, &je) : NULL;
    if (refs && !json_is_array(jr)) {
        snprintf(err, errlen, "subjects.references must be a JSON array of {\"name\", "
                 "\"subject\", \"version\"}, as Confluent's API takes it%s%s",
                 jr ? "" : ": ", jr ? "" : je.text);
        json_decref(jr);
        return NULL;
    }
    json_t *o = json_pack("{s:s}", "schema", schema);
    if (o && type)
        json_object_set_new(o, "schemaType", json_string(type));
    if (o && jr)
        json_object_set(o, "references", jr);
    json_decref(jr);
    char *body = o ? json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;
    json_decref(o);
    return call_taking(b, from, EVHTTP_REQ_POST, subject_path("/subjects", subject, "/versions"),
                       body, true, done, arg, err, errlen);
}

sr_sql_call *sr_sql_delete(bk_broker *b, const sr_sql_from *from, const char *subject,
                           int32_t version, bool permanent, sr_sql_done done, void *arg,
                           char *err, size_t errlen)
{
    if (!subject_named(subject, err, errlen))
        return NULL;
    char rest[64] = "";
    if (version)
        snprintf(rest, sizeof rest, "/versions/%d", (int)version);
    if (permanent)
        strcat(rest, "?permanent=true");
    return call_taking(b, from, EVHTTP_REQ_DELETE, subject_path("/subjects", subject, rest), NULL,
                       false, done, arg, err, errlen);
}

sr_sql_call *sr_sql_setting(bk_broker *b, const sr_sql_from *from, const char *subject,
                            bool mode, const char *value, sr_sql_done done, void *arg,
                            char *err, size_t errlen)
{
    if (!subject_named(subject, err, errlen))
        return NULL;
    json_t *o = value ? json_pack("{s:s}", mode ? "mode" : "compatibility", value) : NULL;
    char *body = o ? json_dumps(o, JSON_COMPACT) : NULL;
    json_decref(o);
    return call_taking(b, from, value ? EVHTTP_REQ_PUT : EVHTTP_REQ_DELETE,
                       subject_path(mode ? "/mode" : "/config", subject, ""), body,
                       value != NULL, done, arg, err, errlen);
}

void sr_sql_cancel(sr_sql_call *c)
{
    if (c)
        c->done = NULL;
}

int sr_sql_start(sr_registry *r, char *err, size_t errlen)
{
    unsigned char raw[SR_SQL_SECRET_HEX / 2];
    if (getrandom(raw, sizeof raw, 0) != (ssize_t)sizeof raw) {
        snprintf(err, errlen, "schema registry: getrandom failed for SQL's secret");
        return -1;
    }
    for (size_t i = 0; i < sizeof raw; i++)
        snprintf(r->sql_secret + 2 * i, 3, "%02x", raw[i]);
    OPENSSL_cleanse(raw, sizeof raw);
    return 0;
}

int sr_sql_who(const sr_registry *r, struct evhttp_request *req, const char **principal,
               char *host, size_t hostlen)
{
    const char *v = evhttp_find_header(evhttp_request_get_input_headers(req), SR_SQL_HEADER);
    if (!v)
        return 0;
    if (strnlen(v, SR_SQL_SECRET_HEX + 1) <= SR_SQL_SECRET_HEX || v[SR_SQL_SECRET_HEX] != ' ' ||
        CRYPTO_memcmp(v, r->sql_secret, SR_SQL_SECRET_HEX) != 0)
        return -1;
    const char *h = v + SR_SQL_SECRET_HEX + 1;
    const char *sp = strchr(h, ' ');
    size_t n = sp ? (size_t)(sp - h) : strlen(h);
    if (n == 0 || n >= hostlen)
        return -1;
    memcpy(host, h, n);
    host[n] = 0;
    if (!strcmp(host, "-"))
        host[0] = 0;
    *principal = sp && sp[1] ? sp + 1 : NULL;
    return 1;
}

void sr_sql_stop(sr_registry *r)
{
    OPENSSL_cleanse(r->sql_secret, sizeof r->sql_secret);
    /* Freeing the connection drops its requests without their callbacks (Q1). */
    if (r->self_conn)
        evhttp_connection_free(r->self_conn);
    r->self_conn = NULL;
    while (r->sql_calls) {
        sr_sql_call *c = r->sql_calls;
        r->sql_calls = c->next;
        call_free(c);
    }
}
