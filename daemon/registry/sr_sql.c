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
 * Invariants:
 *   Q1. A call is on r->sql_calls from its start until its answer (or
 *       sr_stop) frees it; done runs at most once, on a later loop turn,
 *       never after sr_sql_cancel.
 *   Q2. Only plain http:// listeners are called (the client side of TLS is
 *       not here, as in sr_forward.c); a wildcard bind is called on its
 *       loopback address.
 *
 * Authorization: admin/sql_surface.c allows these writes to a principal
 * that may write through SQL (ALTER on the cluster), as every SQL write.
 * The SUBJECT ACL check (WRITE to register, DELETE to delete, ALTER_CONFIGS
 * for a level or mode) belongs on the registry's own request path, which
 * this call goes through; when the registry authenticates, the SQL
 * principal must travel with the call in-process (never as a header a
 * network client could send).
 */
#include "daemon/registry/sr_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/buffer.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>

#define SR_SQL_TIMEOUT_S 30

struct sr_sql_call {
    sr_sql_call *next;                /* r->sql_calls */
    sr_registry *r;
    sr_sql_done done;                 /* NULL: cancelled */
    void *arg;
};

static void call_unlink(sr_sql_call *c)
{
    for (sr_sql_call **pp = &c->r->sql_calls; *pp; pp = &(*pp)->next)
        if (*pp == c) {
            *pp = c->next;
            break;
        }
}

static void call_answered(struct evhttp_request *req, void *arg)
{
    sr_sql_call *c = arg;
    int status = req ? evhttp_request_get_response_code(req) : 0;
    char msg[1024] = "";
    int code = 0;
    if (status <= 0) {
        snprintf(msg, sizeof msg, "the schema registry did not answer");
        code = 50003;
    } else if (status != 200) {
        struct evbuffer *in = evhttp_request_get_input_buffer(req);
        size_t len = evbuffer_get_length(in);
        json_t *j = json_loadb((const char *)evbuffer_pullup(in, -1), len, 0, NULL);
        const char *m = json_string_value(json_object_get(j, "message"));
        code = (int)json_integer_value(json_object_get(j, "error_code"));
        snprintf(msg, sizeof msg, "%s", m ? m : "the schema registry refused the write");
        json_decref(j);
    }
    call_unlink(c);
    if (c->done)
        c->done(c->arg, status, code, msg);
    free(c);
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

/* Sends method path (body NULL: none) to the registry's own listener. */
static sr_sql_call *call_start(bk_broker *b, enum evhttp_cmd_type method, const char *path,
                               const char *body, sr_sql_done done, void *arg, char *err,
                               size_t errlen)
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
    *c = (sr_sql_call){ .next = r->sql_calls, .r = r, .done = done, .arg = arg };
    struct evkeyvalq *h = evhttp_request_get_output_headers(req);
    char host[300];
    snprintf(host, sizeof host, "%s:%d", self_host(r), r->self_port);
    evhttp_add_header(h, "Host", host);
    evhttp_add_header(h, "Content-Type", "application/vnd.schemaregistry.v1+json");
    if (body)
        evbuffer_add(evhttp_request_get_output_buffer(req), body, strlen(body));
    if (evhttp_make_request(r->self_conn, req, method, path) != 0) {
        free(c);                      /* req is freed by libevent on failure */
        snprintf(err, errlen, "cannot reach the schema registry's listener");
        return NULL;
    }
    r->sql_calls = c;
    return c;
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
static sr_sql_call *call_taking(bk_broker *b, enum evhttp_cmd_type method, char *path,
                                char *body, bool has_body, sr_sql_done done, void *arg,
                                char *err, size_t errlen)
{
    sr_sql_call *c = NULL;
    if (!path || (has_body && !body))
        snprintf(err, errlen, "out of memory");
    else
        c = call_start(b, method, path, body, done, arg, err, errlen);
    free(path);
    free(body);
    return c;
}

sr_sql_call *sr_sql_register(bk_broker *b, const char *subject, const char *schema,
                             const char *type, const char *refs, sr_sql_done done, void *arg,
                             char *err, size_t errlen)
{
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
    return call_taking(b, EVHTTP_REQ_POST, subject_path("/subjects", subject, "/versions"),
                       body, true, done, arg, err, errlen);
}

sr_sql_call *sr_sql_delete(bk_broker *b, const char *subject, int32_t version, bool permanent,
                           sr_sql_done done, void *arg, char *err, size_t errlen)
{
    char rest[64] = "";
    if (version)
        snprintf(rest, sizeof rest, "/versions/%d", (int)version);
    if (permanent)
        strcat(rest, "?permanent=true");
    return call_taking(b, EVHTTP_REQ_DELETE, subject_path("/subjects", subject, rest), NULL,
                       false, done, arg, err, errlen);
}

sr_sql_call *sr_sql_setting(bk_broker *b, const char *subject, bool mode, const char *value,
                            sr_sql_done done, void *arg, char *err, size_t errlen)
{
    json_t *o = value ? json_pack("{s:s}", mode ? "mode" : "compatibility", value) : NULL;
    char *body = o ? json_dumps(o, JSON_COMPACT) : NULL;
    json_decref(o);
    return call_taking(b, value ? EVHTTP_REQ_PUT : EVHTTP_REQ_DELETE,
                       subject_path(mode ? "/mode" : "/config", subject, ""), body,
                       value != NULL, done, arg, err, errlen);
}

void sr_sql_cancel(sr_sql_call *c)
{
    if (c)
        c->done = NULL;
}

void sr_sql_stop(sr_registry *r)
{
    /* Freeing the connection drops its requests without their callbacks (Q1). */
    if (r->self_conn)
        evhttp_connection_free(r->self_conn);
    r->self_conn = NULL;
    while (r->sql_calls) {
        sr_sql_call *c = r->sql_calls;
        r->sql_calls = c->next;
        free(c);
    }
}
