/*
 * admin/admin_http.c — the admin HTTP listener (admin.listeners), on the
 * broker's event loop:
 *
 *   GET  /healthz            "ok" (200) while serving, 503 while stopping
 *   GET  /metrics            Prometheus text format (version 0.0.4)
 *   POST /sql                one or more statements in the body; rows out
 *                            as ?format=table|csv|json|line, else by Accept
 *                            (application/json, text/csv, text/plain)
 *                            ?headers=off drops the header line (table, csv)
 *
 * SQL never runs here: the request becomes an sq_job for a worker
 * (sql_worker.c) and is answered when the job comes back.  If the client
 * disconnects first, the connection's close callback cancels the job.
 *
 * Access (with_access; README "The admin endpoint: who may do what"):
 *   1. The admin socket (admin.socket, default <data dir>/admin.sock, mode
 *      0600): the peer's uid (SO_PEERCRED) alone decides: root and the
 *      broker's own uid may do everything, any other is refused (403).
 *   2. Without an authorizer: everything when admin.token is empty (the
 *      listener is then on loopback: a non-loopback address without a
 *      token is refused at startup), else "Authorization: Bearer <token>".
 *   3. With an authorizer (authorizer.class.name) every request is a
 *      principal, checked against its cluster ACLs: ALTER may do all,
 *      DESCRIBE read /metrics and run SQL that does not write (a write is
 *      refused naming the right it needs), neither 403.  The principal:
 *      "Basic base64(user:password)" checked against the user's SCRAM
 *      credential as SASL PLAIN is (on a worker); else the verified TLS
 *      client certificate on an https listener (User:CN=...); else
 *      User:ANONYMOUS, answered 401 rather than 403 when refused, as it
 *      may still log in.  A matching Bearer admin.token is a super-user.
 *      Who sent a request is net_http_authenticate's (daemon/net/net_http.c),
 *      shared with the schema registry.
 *
 * admin.listeners: as daemon/net/net_http.h reads a listener; empty means
 * the default 127.0.0.1:9644, which is best effort (a second broker on the
 * same host just runs without it); "none" turns the listener off;
 * "https://host:port" serves the same over TLS (ssl.* settings).
 */
#include "admin/admin.h"
#include "admin/sql_worker.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/http.h>
#include <sys/queue.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <event2/keyvalq_struct.h>

#include "daemon/security/sec_authz.h"
#include "daemon/view/view.h"
#include "daemon/net/net_metrics.h"
#include "daemon/net/net_http.h"
#include "daemon/security/sec_sasl.h"
#include "daemon/security/sec_peer.h"


#define ADMIN_DEFAULT_HOST "127.0.0.1"
#define ADMIN_DEFAULT_PORT 9644
#define ADMIN_MAX_BODY (1 << 20)

/* ---- helpers ------------------------------------------------------------------------ */
/* Sends buf as the body with code; when the body could not be built (ok
 * false: out of memory) a 500 instead, never a 200 with a cut body. */
static void reply_send(struct evhttp_request *req, int code, const char *reason,
                       const char *ctype, struct evbuffer *buf, bool ok)
{
    if (ok) {
        evhttp_add_header(evhttp_request_get_output_headers(req), "Content-Type", ctype);
        evhttp_send_reply(req, code, reason, buf);
    } else {
        evhttp_send_error(req, HTTP_INTERNAL, NULL);
    }
    if (buf)
        evbuffer_free(buf);
}

static void reply_text(struct evhttp_request *req, int code, const char *reason,
                       const char *ctype, const void *body, size_t len)
{
    struct evbuffer *buf = evbuffer_new();
    reply_send(req, code, reason, ctype, buf,
               buf && (len == 0 || evbuffer_add(buf, body, len) == 0));
}

static void free_body(const void *data, size_t len, void *extra)
{
    (void)len; (void)extra;
    free((void *)data);
}

/* As reply_text, handing body's memory to libevent instead of copying it
 * on the loop (a 50,000-row result is over 1 MB); body is left empty. */
static void reply_buf(struct evhttp_request *req, int code, const char *reason,
                      const char *ctype, kp_buf *body)
{
    struct evbuffer *buf = evbuffer_new();
    bool ok = buf != NULL;
    if (ok && body->len) {
        if (evbuffer_add_reference(buf, body->data, body->len, free_body, NULL) == 0)
            kp_buf_init(body);                        /* libevent frees it */
        else
            ok = evbuffer_add(buf, body->data, body->len) == 0;
    }
    reply_send(req, code, reason, ctype, buf, ok);
}

/* What a request may do. */
enum { AX_DENIED, AX_READ, AX_ALL };

/* A handler's work once the request's access is known (not AX_DENIED):
 * as principal, whose topic ACLs bound what it reads, or NULL for a
 * super-user credential (the token, the socket) or no authorizer. */
typedef void serve_fn(bk_broker *b, struct evhttp_request *req, int access,
                      const char *principal);
/* A handler as net_http_authenticate's argument (a data pointer). */
typedef struct admin_route {
    serve_fn *serve;
} admin_route;

/* 401 with the schemes this endpoint takes: Basic with an authorizer,
 * Bearer with admin.token. */
static void reply_401(bk_broker *b, struct evhttp_request *req, const char *msg)
{
    struct evkeyvalq *oh = evhttp_request_get_output_headers(req);
    if (sec_authz_enabled(b->authz))
        evhttp_add_header(oh, "WWW-Authenticate", "Basic realm=\"sluice\"");
    if (b->cfg->admin_token[0] || !sec_authz_enabled(b->authz))
        evhttp_add_header(oh, "WWW-Authenticate", "Bearer realm=\"sluice\"");
    reply_text(req, 401, "Unauthorized", "text/plain; charset=utf-8", msg, strlen(msg));
}

/* The principal's rights on the cluster (ALTER may do all, DESCRIBE read),
 * then serve, or 403 — 401 for User:ANONYMOUS, who may still log in. */
static void grant(bk_broker *b, struct evhttp_request *req, const char *principal,
                  serve_fn *serve)
{
    const char *host = net_http_peer_host(req);
    kp_str cluster = kp_str_cstr(BK_CLUSTER_NAME);
    int access = AX_DENIED;
    if (sec_authz_check(b->authz, principal, host, BK_RES_CLUSTER, cluster, BK_OP_ALTER))
        access = AX_ALL;
    else if (sec_authz_check(b->authz, principal, host, BK_RES_CLUSTER, cluster,
                            BK_OP_DESCRIBE))
        access = AX_READ;
    if (access != AX_DENIED) {
        serve(b, req, access, principal);
        return;
    }
    if (!strcmp(principal, BK_PRINCIPAL_ANONYMOUS)) {
        reply_401(b, req, "Error: this endpoint needs credentials: \"Authorization: Basic "
                  "base64(user:password)\" of a SASL user, a TLS client certificate or "
                  "\"Authorization: Bearer <admin.token>\"\n");
        return;
    }
    kp_buf o;
    kp_buf_init(&o);
    kp_buf_printf(&o, "Error: %s may not use this endpoint: it needs DESCRIBE (to read) or "
                  "ALTER (to write) on the cluster (kafka-cluster)\n", principal);
    reply_text(req, 403, "Forbidden", "text/plain; charset=utf-8", o.data, o.len);
    kp_buf_free(&o);
}

/* net_http_authenticate's answer: the principal's ACLs decide (grant). */
static void authenticated(bk_broker *b, void *arg, struct evhttp_request *req,
                          enum net_http_who who, const char *what)
{
    const admin_route *route = arg;
    if (who == NET_HTTP_SUPER) {
        route->serve(b, req, AX_ALL, NULL);
    } else if (who == NET_HTTP_PRINCIPAL) {
        grant(b, req, what, route->serve);
    } else {
        char msg[256];
        snprintf(msg, sizeof msg, "Error: %s\n", what);
        reply_401(b, req, msg);
    }
}

/* A request on the admin socket: its peer's uid (SO_PEERCRED) is root or
 * ours → AX_ALL, anyone else AX_DENIED.  -1: not on the admin socket. */
static int peer_access(struct evhttp_request *req, uid_t *uid)
{
    struct bufferevent *bev =
        evhttp_connection_get_bufferevent(evhttp_request_get_connection(req));
    evutil_socket_t fd = bev ? bufferevent_getfd(bev) : -1;
    struct sockaddr_storage ss;
    socklen_t sl = sizeof ss;
    if (fd < 0 || getsockname(fd, (struct sockaddr *)&ss, &sl) || ss.ss_family != AF_UNIX)
        return -1;
    struct ucred cr;
    socklen_t cl = sizeof cr;
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &cl))
        return AX_DENIED;
    *uid = cr.uid;
    return cr.uid == 0 || cr.uid == geteuid() ? AX_ALL : AX_DENIED;
}

/* serve(b, req, access) once the request's access is known, else 401/403:
 *   admin socket         its peer's uid alone decides (root, our own: all)
 *   Bearer <admin.token> all
 *   with an authorizer   the principal's cluster ACLs (grant): Basic's
 *                        user, else the verified TLS client certificate's
 *                        subject, else User:ANONYMOUS
 *   without              admin.token if set (Bearer), else all: the
 *                        listener is then on loopback (bk_admin_start) */
static void with_access(bk_broker *b, struct evhttp_request *req, const admin_route *route)
{
    serve_fn *serve = route->serve;
    uid_t uid = 0;
    int peer = peer_access(req, &uid);
    if (peer == AX_ALL) {
        serve(b, req, AX_ALL, NULL);
        return;
    }
    if (peer == AX_DENIED) {
        BK_WARN("admin: refused uid %u on the admin socket (only root and uid %u may use it)",
                (unsigned)uid, (unsigned)geteuid());
        char msg[160];
        snprintf(msg, sizeof msg, "Error: uid %u may not use the admin socket: only root "
                 "and the broker's own user (uid %u) may\n", (unsigned)uid,
                 (unsigned)geteuid());
        reply_text(req, 403, "Forbidden", "text/plain; charset=utf-8", msg, strlen(msg));
        return;
    }
    const char *h = evhttp_find_header(evhttp_request_get_input_headers(req), "Authorization");
    if (!sec_authz_enabled(b->authz)) {
        if (!b->cfg->admin_token[0] || net_http_token_match(b, h))
            serve(b, req, AX_ALL, NULL);
        else
            reply_401(b, req, "Error: this endpoint needs \"Authorization: Bearer "
                      "<admin.token>\"\n");
        return;
    }
    net_http_authenticate(b, req, "admin", authenticated, (void *)route);
}

/* A pending job's client went away. */
static void on_conn_close(struct evhttp_connection *evcon, void *arg)
{
    (void)evcon;
    sq_job *j = arg;
    j->arg = NULL;
    atomic_store(&j->cancelled, true);
}

static void attach(sq_job *j, struct evhttp_request *req)
{
    j->arg = req;
    evhttp_connection_set_closecb(evhttp_request_get_connection(req), on_conn_close, j);
}

/* The request to answer, or NULL if its client is gone. */
static struct evhttp_request *detach(sq_job *j)
{
    struct evhttp_request *req = j->arg;
    if (req)
        evhttp_connection_set_closecb(evhttp_request_get_connection(req), NULL, NULL);
    return req;
}

/* ---- /healthz ---------------------------------------------------------------------------- */
static void on_healthz(struct evhttp_request *req, void *arg)
{
    bk_broker *b = arg;
    if (b->stopping)
        reply_text(req, 503, "Service Unavailable", "text/plain", "stopping\n", 9);
    else
        reply_text(req, 200, "OK", "text/plain", "ok\n", 3);
}

/* ---- /metrics ------------------------------------------------------------------------------ */
static void metrics_done(sq_job *j)
{
    struct evhttp_request *req = detach(j);
    if (req)
        reply_buf(req, 200, "OK", "text/plain; version=0.0.4; charset=utf-8", &j->res.out);
    sq_job_free(j);
}

/* The surface's own counter, after the loop's metrics (bk_admin_metrics_render):
 * daemon/ renders only what daemon/ owns. */
static void render_sql_metrics(kp_buf *o)
{
    kp_buf_printf(o, "# HELP sluice_sql_messages_bytes_read_total Bytes read from segment "
                  "files by SQL queries on the messages table.\n"
                  "# TYPE sluice_sql_messages_bytes_read_total counter\n"
                  "sluice_sql_messages_bytes_read_total %lld\n",
                  atomic_load(&sq_messages_bytes_read));
}

static void serve_metrics(bk_broker *b, struct evhttp_request *req, int access,
                          const char *principal)
{
    (void)access; (void)principal;
    sq_job *j = calloc(1, sizeof *j);
    if (!j) {
        reply_text(req, 500, "Internal Server Error", "text/plain", "out of memory\n", 14);
        return;
    }
    j->kind = SQ_JOB_METRICS;
    j->done = metrics_done;
    kp_buf_init(&j->res.out);
    bk_admin_metrics_render(b, &j->res.out);
    render_sql_metrics(&j->res.out);
    attach(j, req);
    sq_submit(b, j);
}

static void on_metrics(struct evhttp_request *req, void *arg)
{
    static const admin_route metrics_route = { serve_metrics };
    with_access(arg, req, &metrics_route);
}

/* ---- /sql -------------------------------------------------------------------------------------- */
static const char *content_type(int fmt)
{
    switch (fmt) {
    case SQ_FMT_CSV: return "text/csv; charset=utf-8";
    case SQ_FMT_JSON: return "application/json";
    default: return "text/plain; charset=utf-8";
    }
}

static void sql_done(sq_job *j)
{
    struct evhttp_request *req = detach(j);
    if (!req) {
        sq_job_free(j);
        return;
    }
    struct evkeyvalq *oh = evhttp_request_get_output_headers(req);
    char num[32];
    snprintf(num, sizeof num, "%lld", (long long)j->res.rows);
    evhttp_add_header(oh, "X-Sluice-Rows", num);
    snprintf(num, sizeof num, "%lld", (long long)j->res.changes);
    evhttp_add_header(oh, "X-Sluice-Changes", num);
    if (!j->res.failed) {
        reply_buf(req, 200, "OK", content_type(j->format), &j->res.out);
    } else if (j->format == SQ_FMT_JSON) {
        kp_buf o;
        kp_buf_init(&o);
        kp_buf_printf(&o, "{\"error\":\"");
        for (const char *p = j->res.err; *p; p++) {
            if (*p == '"' || *p == '\\')
                kp_wr_raw(&o, "\\", 1);
            if ((unsigned char)*p >= 0x20)
                kp_wr_raw(&o, p, 1);
        }
        kp_buf_printf(&o, "\"}\n");
        reply_text(req, 400, "Bad Request", content_type(j->format), o.data, o.len);
        kp_buf_free(&o);
    } else {
        kp_buf o;
        kp_buf_init(&o);
        kp_buf_printf(&o, "Error: %s\n", j->res.err);
        reply_text(req, 400, "Bad Request", "text/plain; charset=utf-8", o.data, o.len);
        kp_buf_free(&o);
    }
    sq_job_free(j);
}

static int format_from_accept(const char *accept)
{
    if (!accept) return SQ_FMT_TABLE;
    if (strstr(accept, "application/json")) return SQ_FMT_JSON;
    if (strstr(accept, "text/csv")) return SQ_FMT_CSV;
    return SQ_FMT_TABLE;
}

/* The topics principal may READ, asked here on the loop (the authorizer's
 * decision cache is the loop's); NULL when out of memory. */
static sq_topic_set *readable_topics(bk_broker *b, struct evhttp_request *req,
                                     const char *principal)
{
    const char *host = net_http_peer_host(req);
    sq_topic_set *s = calloc(1, sizeof *s);
    if (s && b->ntopics)
        s->names = calloc(b->ntopics, sizeof *s->names);
    if (!s || (b->ntopics && !s->names)) {
        sq_topic_set_free(s);
        return NULL;
    }
    for (size_t i = 0; i < b->topic_hash_size; i++)
        for (bk_topic *t = b->topic_hash[i]; t && s->n < b->ntopics; t = t->hnext)
            if (sec_authz_check(b->authz, principal, host, BK_RES_TOPIC,
                               kp_str_cstr(t->name), BK_OP_READ)) {
                if (!(s->names[s->n] = strdup(t->name))) {
                    sq_topic_set_free(s);
                    return NULL;
                }
                s->n++;
            }
    sq_topic_set_sort(s);
    return s;
}

static void serve_sql(bk_broker *b, struct evhttp_request *req, int access,
                      const char *principal)
{
    enum evhttp_cmd_type cmd = evhttp_request_get_command(req);
    struct evkeyvalq q;
    TAILQ_INIT(&q);
    const char *query = evhttp_uri_get_query(evhttp_request_get_evhttp_uri(req));
    if (query && evhttp_parse_query_str(query, &q)) {
        reply_text(req, 400, "Bad Request", "text/plain", "Error: bad query string\n", 24);
        return;
    }
    const char *fmt_s = evhttp_find_header(&q, "format");
    int fmt = fmt_s ? sq_format_parse(fmt_s)
                    : format_from_accept(evhttp_find_header(evhttp_request_get_input_headers(req),
                                                            "Accept"));
    const char *hdr = evhttp_find_header(&q, "headers");
    bool headers = !(hdr && (!strcmp(hdr, "off") || !strcmp(hdr, "0") || !strcmp(hdr, "false")));
    char *sql = NULL;
    if (cmd == EVHTTP_REQ_POST) {
        struct evbuffer *in = evhttp_request_get_input_buffer(req);
        size_t len = evbuffer_get_length(in);
        sql = malloc(len + 1);
        if (sql) {
            evbuffer_remove(in, sql, len);
            sql[len] = 0;
        }
    } else if (cmd == EVHTTP_REQ_GET && evhttp_find_header(&q, "q")) {
        sql = strdup(evhttp_find_header(&q, "q"));
    } else {
        evhttp_clear_headers(&q);
        const char *m = "Error: POST a statement to /sql (or GET /sql?q=...)\n";
        reply_text(req, 405, "Method Not Allowed", "text/plain", m, strlen(m));
        return;
    }
    evhttp_clear_headers(&q);
    if (fmt < 0) {
        free(sql);
        const char *m = "Error: format must be table, csv, json or line\n";
        reply_text(req, 400, "Bad Request", "text/plain", m, strlen(m));
        return;
    }
    sq_job *j = sql ? calloc(1, sizeof *j) : NULL;
    if (j && principal && !(j->readable = readable_topics(b, req, principal))) {
        free(j);
        j = NULL;
    }
    if (!j) {
        free(sql);
        reply_text(req, 500, "Internal Server Error", "text/plain", "out of memory\n", 14);
        return;
    }
    const char *auth = evhttp_find_header(evhttp_request_get_input_headers(req),
                                          "Authorization");
    if ((principal && !(j->principal = strdup(principal))) ||
        !(j->host = strdup(net_http_peer_host(req))) ||
        (auth && !(j->authorization = strdup(auth)))) {
        free(sql);
        sq_job_free(j);
        reply_text(req, 500, "Internal Server Error", "text/plain", "out of memory\n", 14);
        return;
    }
    j->kind = SQ_JOB_SQL;
    j->read_only = access == AX_READ;
    j->sql = sql;
    j->format = fmt;
    j->headers = headers;
    j->done = sql_done;
    kp_buf_init(&j->res.out);
    attach(j, req);
    sq_submit(b, j);
}

static void on_sql(struct evhttp_request *req, void *arg)
{
    static const admin_route sql_route = { serve_sql };
    with_access(arg, req, &sql_route);
}

static void on_other(struct evhttp_request *req, void *arg)
{
    (void)arg;
    const char *m = "Not found: try POST /sql, GET /metrics or GET /healthz\n";
    reply_text(req, 404, "Not Found", "text/plain", m, strlen(m));
}

/* ---- start / stop ---------------------------------------------------------------------------- */
/* Binds admin.listeners into a->http; a->http stays NULL when it is
 * "none" or the default address is taken.  0, or -1 with err. */
static int tcp_start(bk_broker *b, struct bk_admin *a, char *err, size_t errlen)
{
    const char *spec = b->cfg->admin_listeners;
    net_http_bound l;
    if (net_http_bind(b, "admin.listeners", spec, ADMIN_DEFAULT_HOST, ADMIN_DEFAULT_PORT, &l,
                      err, errlen) != 0)
        return -1;
    if (!l.http)
        return 0;
    if (!net_http_is_loopback(l.host) && !b->cfg->admin_token[0] &&
        !sec_authz_enabled(b->authz)) {
        evhttp_free(l.http);
        snprintf(err, errlen, "admin.listeners=%s is not a loopback address: set admin.token "
                 "(clients then send \"Authorization: Bearer <token>\"), turn the authorizer "
                 "on (authorizer.class.name) or listen on 127.0.0.1", spec);
        return -1;
    }
    a->http = l.http;
    BK_INFO("admin HTTP on %s://%s:%d (/sql, /metrics, /healthz)%s", l.https ? "https" : "http",
            l.host, l.port, sec_authz_enabled(b->authz) ? ", access by principal (ACLs)"
            : b->cfg->admin_token[0] ? ", bearer token required" : "");
    return 0;
}

/* The admin socket could not be made: fatal when admin.socket names it,
 * else (the default: a full or read-only data dir, a long path) said and
 * the broker runs without it.  0 or -1 with err. */
static int sock_fail(const char *spec, const char *path, const char *why, char *err,
                     size_t errlen)
{
    if (spec[0]) {
        snprintf(err, errlen, "admin.socket=%s: %s", spec, why);
        return -1;
    }
    BK_WARN("admin socket %s: %s; running without it (see admin.socket)", path, why);
    return 0;
}

/* Binds the admin socket (admin.socket; default <data dir>/admin.sock)
 * into a->sock_http, mode 0600 from the start: bound under a temporary
 * name, chmod'ed, then renamed into place.  A socket file nobody answers
 * on is a stale one (a crash) and is replaced; one that answers belongs
 * to a running broker and is left alone (we run without).  0 or -1. */
static int sock_start(bk_broker *b, struct bk_admin *a, char *err, size_t errlen)
{
    const char *spec = b->cfg->admin_socket;
    if (!strcasecmp(spec, "none"))
        return 0;
    struct sockaddr_un sun = { .sun_family = AF_UNIX }, tmp = { .sun_family = AF_UNIX };
    char path[4200];
    if (spec[0])
        snprintf(path, sizeof path, "%s", spec);
    else
        snprintf(path, sizeof path, "%s/admin.sock", b->data_dir);
    int tn = snprintf(tmp.sun_path, sizeof tmp.sun_path, "%s.%d", path, (int)getpid());
    if (tn < 0 || (size_t)tn >= sizeof tmp.sun_path)
        return sock_fail(spec, path, "the path is too long for a Unix socket", err, errlen);
    memcpy(sun.sun_path, path, strlen(path) + 1);         /* shorter than tmp's */
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return sock_fail(spec, path, strerror(errno), err, errlen);
    if (connect(fd, (struct sockaddr *)&sun, sizeof sun) == 0) {
        close(fd);
        return sock_fail(spec, path, "another process answers on it", err, errlen);
    }
    unlink(tmp.sun_path);
    struct stat st;
    if (bind(fd, (struct sockaddr *)&tmp, sizeof tmp) || chmod(tmp.sun_path, 0600) ||
        rename(tmp.sun_path, sun.sun_path) || listen(fd, 64) ||
        evutil_make_socket_nonblocking(fd) || stat(sun.sun_path, &st)) {
        int e = errno;
        unlink(tmp.sun_path);
        close(fd);
        return sock_fail(spec, path, strerror(e), err, errlen);
    }
    a->sock_http = evhttp_new(b->base);
    if (!a->sock_http || !evhttp_accept_socket_with_handle(a->sock_http, fd)) {
        if (a->sock_http)
            evhttp_free(a->sock_http);
        a->sock_http = NULL;
        unlink(sun.sun_path);
        close(fd);
        return sock_fail(spec, path, "cannot serve it", err, errlen);
    }
    memcpy(a->sock_path, sun.sun_path, sizeof a->sock_path);
    a->sock_ino = st.st_ino;
    BK_INFO("admin socket %s (mode 0600; uid 0 and %u only)", a->sock_path,
            (unsigned)geteuid());
    return 0;
}

static void set_routes(struct evhttp *http, bk_broker *b)
{
    evhttp_set_max_body_size(http, ADMIN_MAX_BODY);
    evhttp_set_allowed_methods(http, EVHTTP_REQ_GET | EVHTTP_REQ_POST | EVHTTP_REQ_HEAD);
    evhttp_set_timeout(http, 60);
    evhttp_set_cb(http, "/healthz", on_healthz, b);
    evhttp_set_cb(http, "/metrics", on_metrics, b);
    evhttp_set_cb(http, "/sql", on_sql, b);
    evhttp_set_gencb(http, on_other, b);
}

int bk_admin_start(bk_broker *b, char *err, size_t errlen)
{
    struct bk_admin *a = calloc(1, sizeof *a);
    if (!a) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    a->b = b;
    b->admin = a;
    if (tcp_start(b, a, err, errlen) || sock_start(b, a, err, errlen))
        return -1;
    if (!a->http && !a->sock_http) {
        free(a);
        b->admin = NULL;
        return 0;
    }
    if (sq_workers_start(b, err, errlen))
        return -1;
    if (a->http)
        set_routes(a->http, b);
    if (a->sock_http)
        set_routes(a->sock_http, b);
    return 0;
}

void bk_admin_stop(bk_broker *b)
{
    struct bk_admin *a = b->admin;
    if (!a)
        return;
    sq_workers_stop(b);
    if (a->http)
        evhttp_free(a->http);            /* close callbacks cancel pending jobs */
    if (a->sock_http) {
        evhttp_free(a->sock_http);
        struct stat st;                  /* still ours, not a successor's */
        if (!stat(a->sock_path, &st) && st.st_ino == a->sock_ino)
            unlink(a->sock_path);
    }
    sq_workers_free(b);
    free(a);
    b->admin = NULL;
}
