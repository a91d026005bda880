/*
 * daemon/registry/sr_http.c — the schema registry's HTTP listener
 * (schema.registry.listeners, bound by daemon/net/net_http.c as the admin
 * endpoint's is) on the broker's loop, its answers, and the queue of
 * writes.
 *
 * Every answer is application/vnd.schemaregistry.v1+json; an error is
 * Confluent's {"error_code": N, "message": "..."} (sr_api.c picks the
 * codes).  Requests that write wait in a FIFO while another write is in
 * flight (sr_log.c R1) and are served again, from the start, when it ends:
 * they then see what it changed.  A client that goes away while its
 * request waits takes it off the queue (the connection's close callback);
 * one whose write is in flight leaves the write to finish unanswered.
 * With an authorizer a request is served once its principal is known
 * (sr_auth.c), and a queued one keeps the principal it was checked as.
 */
#include "daemon/registry/sr_int.h"
#include "daemon/net/net_http.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/buffer.h>
#include <event2/event.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>

#define SR_DEFAULT_HOST "127.0.0.1"
#define SR_DEFAULT_PORT 8081
#define SR_CTYPE "application/vnd.schemaregistry.v1+json"
#define SR_TAIL_MS 200

struct sr_pending {
    sr_pending *next;
    sr_registry *r;
    struct evhttp_request *req;
    char *principal;                  /* as checked (sr_auth.c); NULL: may do all */
};

/* ---- answers -------------------------------------------------------------------------- */

static void reply_body(struct evhttp_request *req, int status, const char *body, size_t len)
{
    struct evbuffer *buf = evbuffer_new();
    if (!buf || evbuffer_add(buf, body, len) != 0) {
        evhttp_send_error(req, 500, NULL);
    } else {
        evhttp_add_header(evhttp_request_get_output_headers(req), "Content-Type", SR_CTYPE);
        evhttp_send_reply(req, status, status == 200 ? "OK" : NULL, buf);
    }
    if (buf)
        evbuffer_free(buf);
}

void sr_reply_json(struct evhttp_request *req, int status, json_t *body)
{
    char *s = body ? json_dumps(body, JSON_COMPACT | JSON_PRESERVE_ORDER | JSON_ENCODE_ANY)
                   : NULL;
    json_decref(body);
    if (!s) {
        const char *oom = "{\"error_code\":50001,\"message\":\"out of memory\"}";
        reply_body(req, 500, oom, strlen(oom));
        return;
    }
    reply_body(req, status, s, strlen(s));
    free(s);
}

void sr_reply_error(struct evhttp_request *req, int status, int code, const char *fmt, ...)
{
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    /* jansson refuses a string that is not UTF-8 (the answer became a 500
     * "out of memory"): a name quoted from the request may not be, and the
     * buffer's end may cut a character; such bytes become '?'. */
    size_t n = strlen(msg);
    if (!bk_utf8_valid(msg, n))
        for (size_t i = 0; i < n; i++)
            if ((unsigned char)msg[i] >= 0x80)
                msg[i] = '?';
    sr_reply_json(req, status, json_pack("{s:i, s:s}", "error_code", code, "message", msg));
}

void sr_reply_raw(struct evhttp_request *req, const char *text)
{
    reply_body(req, 200, text, strlen(text));
}

void sr_reply_text(struct evhttp_request *req, int status, const char *json)
{
    reply_body(req, status, json, strlen(json));
}

/* ---- the queue of writes ------------------------------------------------------------------ */

static void pending_gone(struct evhttp_connection *evcon, void *arg)
{
    (void)evcon;
    sr_pending *p = arg;
    sr_registry *r = p->r;
    sr_pending **pp = &r->queue, *prev = NULL;
    while (*pp && *pp != p) {
        prev = *pp;
        pp = &(*pp)->next;
    }
    if (*pp) {
        *pp = p->next;
        if (r->queue_tail == p)
            r->queue_tail = prev;
    }
    free(p->principal);
    free(p);
}

void sr_queue(sr_registry *r, struct evhttp_request *req, const char *principal)
{
    sr_pending *p = calloc(1, sizeof *p);
    if (p && principal && !(p->principal = strdup(principal))) {
        free(p);
        p = NULL;
    }
    if (!p) {
        sr_reply_error(req, 500, 50001, "out of memory");
        return;
    }
    p->r = r;
    p->req = req;
    if (r->queue_tail)
        r->queue_tail->next = p;
    else
        r->queue = p;
    r->queue_tail = p;
    evhttp_connection_set_closecb(evhttp_request_get_connection(req), pending_gone, p);
}

/* The queue's head, once no write is in flight: served from the start. */
static void serve_next(evutil_socket_t fd, short what, void *arg)
{
    (void)fd; (void)what;
    sr_registry *r = arg;
    while (r->queue && !r->writing) {
        sr_pending *p = r->queue;
        r->queue = p->next;
        if (!r->queue)
            r->queue_tail = NULL;
        struct evhttp_request *req = p->req;
        evhttp_connection_set_closecb(evhttp_request_get_connection(req), NULL, NULL);
        r->from_queue = true;         /* its turn: not queued again behind the rest */
        sr_api_serve(r, req, p->principal);
        r->from_queue = false;
        free(p->principal);
        free(p);
    }
}

/* ---- requests ------------------------------------------------------------------------------- */

static void on_request(struct evhttp_request *req, void *arg)
{
    sr_registry *r = arg;
    r->requests++;
    enum evhttp_cmd_type m = evhttp_request_get_command(req);
    if ((m == EVHTTP_REQ_GET || m == EVHTTP_REQ_HEAD) && sr_follow_behind(r)) {
        r->errors++;                  /* sr_follow.c: not yet what the leader had */
        sr_reply_error(req, 500, 50003, "This broker has no replica of %s and is still "
                       "reading it from its leader (at offset %lld); retry", SR_TOPIC,
                       (long long)r->applied);
        return;
    }
    sr_auth_serve(r, req);            /* reads answer at once; writes may queue */
}

void sr_kick(sr_registry *r)
{
    if (r->queue && !r->writing)
        event_active(r->next_ev, EV_TIMEOUT, 0);
}

/* Followers apply what replication brought (sr_log.c). */
static void on_tail(evutil_socket_t fd, short what, void *arg)
{
    (void)fd; (void)what;
    sr_registry *r = arg;
    if (!r->writing)
        sr_log_tail(r);
}

int sr_start(bk_broker *b, char *err, size_t errlen)
{
    sr_registry *r = calloc(1, sizeof *r);
    if (!r) {
        snprintf(err, errlen, "schema registry: out of memory");
        return -1;
    }
    r->b = b;
    r->fwd_leader = -1;
    if (sr_sql_start(r, err, errlen) != 0) {
        free(r);
        return -1;
    }
    r->follow_target = -1;
    snprintf(r->compat, sizeof r->compat, "BACKWARD");
    snprintf(r->mode, sizeof r->mode, "READWRITE");
    net_http_bound l;
    if (net_http_bind(b, "schema.registry.listeners", b->cfg->schema_registry_listeners,
                      SR_DEFAULT_HOST, SR_DEFAULT_PORT, &l, err, errlen) != 0) {
        free(r);
        return -1;
    }
    if (!l.http) {
        free(r);
        return 0;
    }
    r->http = l.http;
    /* sr_sql.c Q2: the bound socket's own address, never a name to look up */
    snprintf(r->self_host, sizeof r->self_host, "%s", l.addr[0] ? l.addr : l.host);
    r->self_port = l.port;
    r->self_https = l.https;
    b->registry = r;
    b->schema_check = sr_validate_check;
    r->next_ev = event_new(b->base, -1, 0, serve_next, r);
    r->tail_ev = event_new(b->base, -1, EV_PERSIST, on_tail, r);
    struct timeval tv = { 0, SR_TAIL_MS * 1000 };
    sr_mirror_start(r);
    if (!r->next_ev || !r->tail_ev || event_add(r->tail_ev, &tv) != 0 || sr_log_tail(r) != 0) {
        snprintf(err, errlen, "schema registry: cannot load %s (see the log above)", SR_TOPIC);
        return -1;
    }
    sr_mirror_serve(r);
    evhttp_set_max_body_size(r->http, SR_MAX_BODY);
    evhttp_set_allowed_methods(r->http, EVHTTP_REQ_GET | EVHTTP_REQ_POST | EVHTTP_REQ_PUT |
                               EVHTTP_REQ_DELETE | EVHTTP_REQ_HEAD | EVHTTP_REQ_PATCH |
                               EVHTTP_REQ_OPTIONS);  /* the last two: our 405, in JSON */
    evhttp_set_timeout(r->http, 60);
    evhttp_set_gencb(r->http, on_request, r);
    BK_INFO("schema registry on %s://%s:%d (Confluent's REST API; state in %s)",
            l.https ? "https" : "http", l.host, l.port, SR_TOPIC);
    return 0;
}

void sr_stop(bk_broker *b)
{
    sr_registry *r = b->registry;
    if (!r)
        return;
    evhttp_free(r->http);             /* close callbacks drop the queued requests */
    r->http = NULL;
    sr_forward_stop(r);
    sr_sql_stop(r);
    sr_follow_stop(r);
    sr_log_stop(r);
    sr_mirror_stop(r);
    while (r->queue)
        pending_gone(NULL, r->queue);
    if (r->next_ev)
        event_free(r->next_ev);
    if (r->tail_ev)
        event_free(r->tail_ev);
    b->schema_check = NULL;
    sr_validate_free(r);
    sr_state_free(r);
    free(r);
    b->registry = NULL;
}

void sr_metrics_render(bk_broker *b, kp_buf *out)
{
    sr_registry *r = b->registry;
    if (!r)
        return;
    kp_buf_printf(out, "# HELP sluice_schema_registry_requests_total HTTP requests to the "
                  "schema registry.\n# TYPE sluice_schema_registry_requests_total counter\n"
                  "sluice_schema_registry_requests_total %lld\n", (long long)r->requests);
    kp_buf_printf(out, "# HELP sluice_schema_registry_registrations_total Schemas registered "
                  "(new versions).\n# TYPE sluice_schema_registry_registrations_total counter\n"
                  "sluice_schema_registry_registrations_total %lld\n",
                  (long long)r->registrations);
    kp_buf_printf(out, "# HELP sluice_schema_registry_lookups_total Schema lookups (by id, by "
                  "subject and version, by schema).\n# TYPE sluice_schema_registry_lookups_total "
                  "counter\nsluice_schema_registry_lookups_total %lld\n", (long long)r->lookups);
    kp_buf_printf(out, "# HELP sluice_schema_registry_validation_refusals_total Produced keys "
                  "or values refused by a topic's schema validation (sr_validate.c).\n# TYPE "
                  "sluice_schema_registry_validation_refusals_total counter\n"
                  "sluice_schema_registry_validation_refusals_total %lld\n",
                  (long long)r->validation_refusals);
    kp_buf_printf(out, "# HELP sluice_schema_registry_auth_failures_total Requests refused "
                  "401: no or wrong credentials, with an authorizer (sr_auth.c).\n# TYPE "
                  "sluice_schema_registry_auth_failures_total counter\n"
                  "sluice_schema_registry_auth_failures_total %lld\n",
                  (long long)r->auth_failures);
    kp_buf_printf(out, "# HELP sluice_schema_registry_authorization_refusals_total Requests "
                  "refused 403: the principal lacks the ACL (sr_auth.c).\n# TYPE "
                  "sluice_schema_registry_authorization_refusals_total counter\n"
                  "sluice_schema_registry_authorization_refusals_total %lld\n",
                  (long long)r->auth_refusals);
    kp_buf_printf(out, "# HELP sluice_schema_registry_schemas Distinct schemas held.\n"
                  "# TYPE sluice_schema_registry_schemas gauge\nsluice_schema_registry_schemas "
                  "%zu\n", r->nschemas);
}
