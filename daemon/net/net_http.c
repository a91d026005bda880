/*
 * daemon/net/net_http.c — binds an HTTP listener on the broker's loop
 * (net_http.h): the admin endpoint's and the schema registry's.
 */
#include "daemon/net/net_http.h"
#include "daemon/security/sec_sasl.h"
#include "protocol/kp_scram.h"
#include "daemon/security/sec_tls.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <sys/socket.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <event2/bufferevent_ssl.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>

#include <openssl/crypto.h>
#include <openssl/ssl.h>

bool net_http_is_loopback(const char *host)
{
    struct in_addr a4;
    struct in6_addr a6;
    if (!strcmp(host, "localhost"))
        return true;
    if (inet_pton(AF_INET, host, &a4) == 1)
        return (ntohl(a4.s_addr) >> 24) == 127;
    if (inet_pton(AF_INET6, host, &a6) == 1)
        return IN6_IS_ADDR_LOOPBACK(&a6);
    return false;
}

static int parse_listener(const char *v, char *host, size_t cap, int *port)
{
    const char *p = strstr(v, "://");
    p = p ? p + 3 : v;
    const char *colon = strrchr(p, ':');
    if (!colon || colon == p)
        return -1;
    size_t hl = (size_t)(colon - p);
    if (*p == '[' && hl >= 2 && p[hl - 1] == ']') {
        p++;
        hl -= 2;
    }
    if (hl >= cap)
        return -1;
    memcpy(host, p, hl);
    host[hl] = 0;
    char *end;
    long pv = strtol(colon + 1, &end, 10);
    if (end == colon + 1 || (*end && *end != '/') || pv < 0 || pv > 65535)
        return -1;
    *port = (int)pv;
    return 0;
}

/* https://: each accepted connection speaks TLS. */
static struct bufferevent *https_bev(struct event_base *base, void *arg)
{
    SSL *ssl = SSL_new(arg);
    if (!ssl)
        return NULL;
    struct bufferevent *bev = bufferevent_openssl_socket_new(base, -1, ssl,
                                                             BUFFEREVENT_SSL_ACCEPTING,
                                                             BEV_OPT_CLOSE_ON_FREE);
    if (!bev)
        SSL_free(ssl);
    return bev;
}

/* fd's own address, numeric; a wildcard's loopback; "" when unknown. */
static void bound_addr(evutil_socket_t fd, char *addr, size_t len)
{
    struct sockaddr_storage ss;
    socklen_t sl = sizeof ss;
    addr[0] = 0;
    if (getsockname(fd, (struct sockaddr *)&ss, &sl) != 0 ||
        getnameinfo((struct sockaddr *)&ss, sl, addr, (socklen_t)len, NULL, 0,
                    NI_NUMERICHOST) != 0) {
        addr[0] = 0;
        return;
    }
    if (!strcmp(addr, "0.0.0.0"))
        snprintf(addr, len, "127.0.0.1");
    else if (!strcmp(addr, "::"))
        snprintf(addr, len, "::1");
}

int net_http_bind(bk_broker *b, const char *key, const char *spec, const char *dflt_host,
                  int dflt_port, net_http_bound *out, char *err, size_t errlen)
{
    memset(out, 0, sizeof *out);
    if (!strcasecmp(spec, "none"))
        return 0;
    bool dflt = !spec[0];
    if (dflt) {
        snprintf(out->host, sizeof out->host, "%s", dflt_host);
        out->port = dflt_port;
    } else if (parse_listener(spec, out->host, sizeof out->host, &out->port)) {
        snprintf(err, errlen, "%s=%s: expected http://host:port or https://host:port", key,
                 spec);
        return -1;
    }
    struct evhttp *http = evhttp_new(b->base);
    if (!http) {
        snprintf(err, errlen, "%s: cannot create an HTTP server", key);
        return -1;
    }
    out->https = !strncasecmp(spec, "https://", 8);
    if (out->https) {
        char terr[512];
        SSL_CTX *ctx = sec_tls_server_ctx(b, terr, sizeof terr);
        if (!ctx) {
            evhttp_free(http);
            snprintf(err, errlen, "%s=%s: %s", key, spec, terr);
            return -1;
        }
        evhttp_set_bevcb(http, https_bev, ctx);
    }
    struct evhttp_bound_socket *bound =
        evhttp_bind_socket_with_handle(http, out->host, (ev_uint16_t)out->port);
    if (!bound) {
        evhttp_free(http);
        if (dflt) {
            BK_WARN("%s: cannot listen on %s:%d (in use?); running without it (set %s to "
                    "choose another address)", key, out->host, out->port, key);
            return 0;
        }
        snprintf(err, errlen, "%s=%s: cannot listen on %s:%d", key, spec, out->host,
                 out->port);
        return -1;
    }
    out->http = http;
    bound_addr(evhttp_bound_socket_get_fd(bound), out->addr, sizeof out->addr);
    return 0;
}

/* ---- who sent a request ------------------------------------------------------------------ */

bool net_http_token_match(bk_broker *b, const char *h)
{
    const char *tok = b->cfg->admin_token;
    if (!tok[0] || !h || strncasecmp(h, "Bearer ", 7))
        return false;
    h += 7;
    size_t tl = strlen(tok), hl = strlen(h);
    unsigned diff = (unsigned)(tl ^ hl);
    for (size_t i = 0; i < tl; i++)
        diff |= (unsigned char)tok[i] ^ (unsigned char)(i < hl ? h[i] : 0);
    return diff == 0;
}

const char *net_http_peer_host(struct evhttp_request *req)
{
    char *host = NULL;
    ev_uint16_t port;
    evhttp_connection_get_peer(evhttp_request_get_connection(req), &host, &port);
    return host ? host : "";
}

#define NET_HTTP_BAD_LOGIN "invalid user name or password"

/* A Basic login waiting for its password check (sec_sasl.c inv. 3); the
 * client going away cancels it. */
typedef struct basic_wait {
    bk_broker *b;
    struct evhttp_request *req;
    const char *room;
    net_http_who_fn *done;
    void *arg;
    bk_sasl_check *check;            /* NULL once answered */
    char principal[sizeof "User:" + SCRAM_MAX_NAME];
} basic_wait;

static void basic_gone(struct evhttp_connection *evcon, void *arg)
{
    (void)evcon;
    basic_wait *w = arg;
    sec_sasl_check_cancel(w->check);
    free(w);
}

static void basic_checked(void *arg, bool ok)
{
    basic_wait *w = arg;
    struct evhttp_request *req = w->req;
    if (w->check)
        evhttp_connection_set_closecb(evhttp_request_get_connection(req), NULL, NULL);
    w->check = NULL;
    if (ok) {
        w->done(w->b, w->arg, req, NET_HTTP_PRINCIPAL, w->principal);
    } else {
        BK_WARN("%s: refused a Basic login as %s: " NET_HTTP_BAD_LOGIN, w->room,
                w->principal + 5);
        w->done(w->b, w->arg, req, NET_HTTP_REFUSED, NET_HTTP_BAD_LOGIN);
    }
    free(w);
}

/* "Basic base64(user:password)": done runs once the login is checked. */
static void basic_login(bk_broker *b, struct evhttp_request *req, const char *cred,
                        const char *room, net_http_who_fn *done, void *arg)
{
    char dec[2 * SCRAM_MAX_NAME + 256];
    int n = kp_scram_b64_decode(cred, strlen(cred), (uint8_t *)dec, sizeof dec - 1);
    char *colon = n > 0 ? memchr(dec, ':', (size_t)n) : NULL;
    basic_wait *w = colon && colon != dec && (size_t)(colon - dec) < SCRAM_MAX_NAME
                    ? calloc(1, sizeof *w) : NULL;
    if (!w) {
        BK_WARN("%s: refused a Basic login: %s", room, colon ? "out of memory"
                : "not base64 of user:password");
        OPENSSL_cleanse(dec, sizeof dec);
        done(b, arg, req, NET_HTTP_REFUSED, NET_HTTP_BAD_LOGIN);
        return;
    }
    dec[n] = 0;
    *colon = 0;
    *w = (basic_wait){ .b = b, .req = req, .room = room, .done = done, .arg = arg };
    memcpy(w->principal, "User:", 5);
    memcpy(w->principal + 5, dec, (size_t)(colon - dec) + 1);    /* < SCRAM_MAX_NAME, NUL */
    bk_sasl_check *c = sec_sasl_check_password(b, dec, colon + 1,
                                              (size_t)(dec + n - colon - 1), basic_checked, w);
    OPENSSL_cleanse(dec, sizeof dec);
    if (c) {                         /* pending: w is alive until basic_checked / basic_gone */
        w->check = c;
        evhttp_connection_set_closecb(evhttp_request_get_connection(req), basic_gone, w);
    }
}

void net_http_authenticate(bk_broker *b, struct evhttp_request *req, const char *room,
                           net_http_who_fn *done, void *arg)
{
    const char *h = evhttp_find_header(evhttp_request_get_input_headers(req), "Authorization");
    if (net_http_token_match(b, h)) {
        done(b, arg, req, NET_HTTP_SUPER, NULL);
        return;
    }
    if (h && !strncasecmp(h, "Basic ", 6)) {
        basic_login(b, req, h + 6, room, done, arg);
        return;
    }
    if (h) {
        done(b, arg, req, NET_HTTP_REFUSED, "invalid credentials: send \"Authorization: Basic "
             "base64(user:password)\" or \"Bearer <admin.token>\"");
        return;
    }
    char principal[BK_PRINCIPAL_MAX];
    struct bufferevent *bev =
        evhttp_connection_get_bufferevent(evhttp_request_get_connection(req));
    SSL *ssl = bev ? bufferevent_openssl_get_ssl(bev) : NULL;
    if (!ssl || sec_tls_peer_principal(ssl, principal, sizeof principal))
        snprintf(principal, sizeof principal, "%s", BK_PRINCIPAL_ANONYMOUS);
    done(b, arg, req, NET_HTTP_PRINCIPAL, principal);
}
