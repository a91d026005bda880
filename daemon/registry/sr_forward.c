/*
 * daemon/registry/sr_forward.c — cluster mode: a write that reaches a
 * broker which does not lead _schemas-0 is forwarded to the registry of the
 * broker that does (the one writer, sr_log.c), as Confluent's followers
 * forward to their leader, and its answer relayed as it came.
 *
 * Where the leader's registry listens: its schema.registry.listeners,
 * asked once per leader with DescribeConfigs over the inter-broker
 * connection (replication/repl_peer.h), a wildcard host replaced by the
 * leader's advertised one; kept until leadership moves.
 *
 *     sr_forward ── URL known? ──no──► DescribeConfigs ──► url_answered
 *          │ yes                                               │
 *          ▼                                                   ▼
 *     (the connection is kept while the URL stays the same: forwards
 *     waiting for their own DescribeConfigs at once share it)
 *     send: the same method, path, query, Content-Type, Authorization and
 *     body, with X-Sluice-Forwarded (a forwarded request is never
 *     forwarded again)
 *          ▼
 *     relayed: status and body as the leader answered; no answer (the
 *     leader died, a timeout): 50003, Confluent's forwarding error
 *
 * A client that goes away meanwhile leaves the forward to finish
 * unanswered (fw->req NULL).  An https:// leader is forwarded to over TLS
 * with the broker-to-broker client context (security/sec_tls.h: the
 * truststore verifies the leader, the keystore is presented when asked).
 *
 * With an authorizer, this broker has checked the client's right before
 * forwarding (sr_auth.c); the leader authenticates the forwarded
 * Authorization (Basic, the token) and checks it again.  A client known
 * by its TLS certificate only has nothing to forward: the leader sees
 * User:ANONYMOUS.  A write through SQL carries the SQL client's
 * Authorization, never this broker's SR_SQL_HEADER (sr_sql.c Q3, Q4), and
 * without an Authorization to carry is refused here, naming the leader.
 *
 * Invariants:
 *   F1. Every forward sent is answered exactly once: by the leader, by the
 *       connection's failure or timeout (SR_FORWARD_TIMEOUT_S), or, when
 *       the connection is freed while it is in flight (leadership moved,
 *       shutdown), by fwd_conn_free before the free: libevent frees a
 *       connection's requests without calling them back.  r->fwds lists
 *       the forwards sent and not yet answered.
 *   F2. A forward is in r->fwds before evhttp_make_request: without a DNS
 *       base libevent calls the request back inside that call (the host
 *       does not resolve, socket() fails) and still returns 0; fw then
 *       outlives its answer until the call returns (fw->ended).
 */
#include "daemon/registry/sr_int.h"
#include "daemon/replication/repl_peer.h"
#include "daemon/security/sec_authz.h"
#include "daemon/security/sec_tls.h"
#include "daemon/view/view.h"
#include "kp_msgs.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>

#define SR_FORWARD_TIMEOUT_S 15

struct sr_fwd {
    sr_registry *r;
    struct evhttp_request *req;       /* NULL: the client went away */
    int32_t leader;
    struct evhttp_connection *conn;   /* sent on it (F1); NULL: not sent yet */
    sr_fwd *prev, *next;              /* r->fwds while sent */
    bool sending;                     /* inside evhttp_make_request (F2) */
    bool ended;                       /* answered while sending: freed by fwd_send */
};

/* fw answered: freed, unless evhttp_make_request called back before
 * returning (F2), when fwd_send frees it. */
static void fwd_end(sr_fwd *fw)
{
    if (fw->sending)
        fw->ended = true;
    else
        free(fw);
}

static void fwd_unlink(sr_fwd *fw)
{
    if (!fw->conn)
        return;
    if (fw->prev)
        fw->prev->next = fw->next;
    else
        fw->r->fwds = fw->next;
    if (fw->next)
        fw->next->prev = fw->prev;
    fw->conn = NULL;
}

static void fwd_gone(struct evhttp_connection *evcon, void *arg)
{
    (void)evcon;
    ((sr_fwd *)arg)->req = NULL;
}

/* The end of a forward: fw answered with (status, code, msg) unless gone. */
static void fwd_fail(sr_fwd *fw, const char *fmt, const char *detail)
{
    fwd_unlink(fw);
    if (fw->req) {
        evhttp_connection_set_closecb(evhttp_request_get_connection(fw->req), NULL, NULL);
        char msg[512];
        snprintf(msg, sizeof msg, fmt, detail);
        sr_reply_error(fw->req, 500, 50003, "Error while forwarding the request to the "
                       "leader (broker %d): %s", (int)fw->leader, msg);
    }
    fwd_end(fw);
}

static void fwd_answered(struct evhttp_request *freq, void *arg)
{
    sr_fwd *fw = arg;
    int status = freq ? evhttp_request_get_response_code(freq) : 0;
    if (status <= 0) {
        fw->r->fwd_leader = -1;                      /* ask again next time */
        fwd_fail(fw, "%s", "no answer");
        return;
    }
    fwd_unlink(fw);
    if (fw->req) {
        evhttp_connection_set_closecb(evhttp_request_get_connection(fw->req), NULL, NULL);
        struct evbuffer *in = evhttp_request_get_input_buffer(freq);
        size_t len = evbuffer_get_length(in);
        char *body = len ? (char *)evbuffer_pullup(in, -1) : (char *)"";
        char *copy = strndup(body, len);
        if (copy)
            sr_reply_text(fw->req, status, copy);
        else
            sr_reply_error(fw->req, 500, 50001, "out of memory");
        free(copy);
    }
    fwd_end(fw);
}

/* A write through SQL with a login to forward goes to an https leader
 * only (sr_sql.c Q4): the SQL client's password or admin.token never
 * crosses the network in clear, whatever listener it came in on. */
static bool fwd_sql_in_clear(sr_fwd *fw)
{
    sr_registry *r = fw->r;
    const char *who;
    char host[SR_HOST_MAX];
    if (r->fwd_https || sr_sql_who(r, fw->req, &who, host, sizeof host) != 1 ||
        !evhttp_find_header(evhttp_request_get_input_headers(fw->req), "Authorization"))
        return false;
    evhttp_connection_set_closecb(evhttp_request_get_connection(fw->req), NULL, NULL);
    sr_reply_error(fw->req, 500, 50003, "this write through SQL goes to the _schemas leader, "
                   "broker %d, whose registry listens on plain http: the SQL client's login "
                   "is not sent there in clear (sr_sql.c Q4); run it on broker %d",
                   (int)fw->leader, (int)fw->leader);
    free(fw);
    return true;
}

static void fwd_send(sr_fwd *fw)
{
    sr_registry *r = fw->r;
    if (!fw->req) {
        free(fw);
        return;
    }
    if (fwd_sql_in_clear(fw))
        return;
    const char *why = "out of memory";
    if (!r->fwd_conn) {
        char err[256] = "";
        struct bufferevent *bev = NULL;
        if (!r->fwd_https || (bev = sec_tls_client_bev(r->b, r->fwd_host, err, sizeof err,
                                                       &why)))
            r->fwd_conn = evhttp_connection_base_bufferevent_new(r->b->base, NULL, bev,
                                                                 r->fwd_host,
                                                                 (ev_uint16_t)r->fwd_port);
        if (r->fwd_conn)
            evhttp_connection_set_timeout(r->fwd_conn, SR_FORWARD_TIMEOUT_S);
        else if (bev)
            bufferevent_free(bev);
    }
    struct evhttp_request *freq = r->fwd_conn ? evhttp_request_new(fwd_answered, fw) : NULL;
    if (!freq) {
        fwd_fail(fw, "%s", why);
        return;
    }
    struct evkeyvalq *in = evhttp_request_get_input_headers(fw->req);
    struct evkeyvalq *out = evhttp_request_get_output_headers(freq);
    const char *ct = evhttp_find_header(in, "Content-Type");
    char host[300];
    snprintf(host, sizeof host, "%s:%d", r->fwd_host, r->fwd_port);
    evhttp_add_header(out, "Host", host);
    evhttp_add_header(out, "Content-Type", ct ? ct : "application/vnd.schemaregistry.v1+json");
    evhttp_add_header(out, "X-Sluice-Forwarded", "1");
    const char *auth = evhttp_find_header(in, "Authorization");
    if (auth)                                    /* the leader checks the same principal */
        evhttp_add_header(out, "Authorization", auth);
    evbuffer_add_buffer(evhttp_request_get_output_buffer(freq),
                        evhttp_request_get_input_buffer(fw->req));
    fw->conn = r->fwd_conn;                      /* F1, F2 */
    fw->next = r->fwds;
    if (r->fwds)
        r->fwds->prev = fw;
    r->fwds = fw;
    fw->sending = true;
    int rc = evhttp_make_request(r->fwd_conn, freq, evhttp_request_get_command(fw->req),
                                 evhttp_request_get_uri(fw->req));
    fw->sending = false;
    if (fw->ended)
        free(fw);                                /* F2: answered inside the call */
    else if (rc != 0)
        fwd_fail(fw, "%s", "cannot send");       /* no socket: rare; freq is not ours */
}

/* F1: the forwards in flight on r->fwd_conn answered, then it is freed. */
static void fwd_conn_free(sr_registry *r, const char *why)
{
    if (!r->fwd_conn)
        return;
    for (sr_fwd *fw = r->fwds, *next; fw; fw = next) {
        next = fw->next;
        if (fw->conn == r->fwd_conn)
            fwd_fail(fw, "%s", why);
    }
    evhttp_connection_free(r->fwd_conn);
    r->fwd_conn = NULL;
}

/* The leader's schema.registry.listeners, as DescribeConfigs answered. */
static void url_answered(void *arg, int16_t error, kp_rd *body)
{
    sr_fwd *fw = arg;
    sr_registry *r = fw->r;
    kp_arena arena;
    kp_arena_init(&arena, 0);
    kp_DescribeConfigsResponse resp;
    const char *why = "its DescribeConfigs answer did not name schema.registry.listeners";
    char url[300] = "";
    if (error != KP_NONE) {
        why = kp_error_name(error);
    } else if (kp_dec_DescribeConfigsResponse(body, 1, &resp, &arena) == 0) {
        for (int32_t i = 0; i < resp.Results_count && resp.Results_count > 0; i++)
            for (int32_t k = 0; k < resp.Results[i].Configs_count; k++) {
                const kp_DescribeConfigsResponse_DescribeConfigsResourceResult *c =
                    &resp.Results[i].Configs[k];
                if (c->Value.len > 0 && (size_t)c->Value.len < sizeof url)
                    snprintf(url, sizeof url, "%.*s", (int)c->Value.len, c->Value.p);
            }
    }
    kp_arena_free(&arena);
    char host[256] = "";
    int port = 8081;
    const char *p = strstr(url, "://");
    if (!url[0]) {
        fwd_fail(fw, "%s", why);
        return;
    }
    if (!strcasecmp(url, "none")) {
        fwd_fail(fw, "%s", "its registry is off (schema.registry.listeners=none)");
        return;
    }
    p = p ? p + 3 : url;
    const char *colon = strrchr(p, ':');
    if (colon && (size_t)(colon - p) < sizeof host) {
        memcpy(host, p, (size_t)(colon - p));
        host[colon - p] = 0;
        port = atoi(colon + 1);
    }
    if (!host[0] || !strcmp(host, "0.0.0.0") || !strcmp(host, "::")) {
        bk_broker_info bi[64];                   /* a wildcard: its advertised host */
        int n = view_brokers_info(r->b, NULL, bi, 64);
        for (int i = 0; i < n; i++)
            if (bi[i].id == fw->leader)
                snprintf(host, sizeof host, "%s", bi[i].host);
    }
    bool https = !strncasecmp(url, "https://", 8);
    if (strcmp(r->fwd_host, host) || r->fwd_port != port || r->fwd_https != https)
        fwd_conn_free(r, "the connection to it was closed as _schemas moved to another "
                      "leader; retry");          /* the same URL: forwards in flight stay */
    snprintf(r->fwd_host, sizeof r->fwd_host, "%s", host);
    r->fwd_port = port;
    r->fwd_https = https;
    r->fwd_leader = fw->leader;
    fwd_send(fw);
}

bool sr_forward(sr_registry *r, struct evhttp_request *req)
{
    if (!bk_cluster_mode(r->b) ||
        evhttp_find_header(evhttp_request_get_input_headers(req), "X-Sluice-Forwarded"))
        return false;
    kp_str topic = { SR_TOPIC, (int32_t)sizeof SR_TOPIC - 1 };
    const bk_pview *v = view_partition(r->b, topic, 0);
    if (!v || v->leader < 0 || v->leader == r->b->cfg->broker_id)
        return false;                            /* here, or nobody to forward to */
    const char *who;
    char host[SR_HOST_MAX];
    if (sec_authz_enabled(r->b->authz) && sr_sql_who(r, req, &who, host, sizeof host) == 1 &&
        !evhttp_find_header(evhttp_request_get_input_headers(req), "Authorization")) {
        sr_reply_error(req, 500, 50003, "this write through SQL goes to the _schemas leader, "
                       "broker %d, with the SQL client's login (sr_sql.c Q4), and this one "
                       "has none to forward (a TLS certificate or the admin socket): run it on "
                       "broker %d", (int)v->leader, (int)v->leader);
        return true;
    }
    sr_fwd *fw = calloc(1, sizeof *fw);
    if (!fw)
        return false;
    *fw = (sr_fwd){ .r = r, .req = req, .leader = v->leader };
    evhttp_connection_set_closecb(evhttp_request_get_connection(req), fwd_gone, fw);
    if (r->fwd_leader == v->leader) {
        fwd_send(fw);
        return true;
    }
    kp_DescribeConfigsRequest q;
    kp_init_DescribeConfigsRequest(&q);
    char name[16];
    snprintf(name, sizeof name, "%d", (int)v->leader);
    kp_str key = kp_str_cstr("schema.registry.listeners");
    kp_DescribeConfigsRequest_DescribeConfigsResource res = {
        .ResourceType = 4, .ResourceName = kp_str_cstr(name), .ConfigurationKeys = &key,
        .ConfigurationKeys_count = 1 };
    q.Resources = &res;
    q.Resources_count = 1;
    kp_buf body;
    kp_buf_init(&body);
    if (kp_enc_DescribeConfigsRequest(&body, 1, &q) != 0 || body.err) {
        kp_buf_free(&body);
        evhttp_connection_set_closecb(evhttp_request_get_connection(req), NULL, NULL);
        free(fw);
        return false;
    }
    repl_peer_call(r->b, v->leader, KP_API_DESCRIBE_CONFIGS, 1, body.data, body.len,
                   SR_FORWARD_TIMEOUT_S * 1000, url_answered, fw);
    kp_buf_free(&body);
    return true;
}

void sr_forward_stop(sr_registry *r)
{
    fwd_conn_free(r, "shutting down");
}
