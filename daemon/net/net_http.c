/*
 * daemon/net/net_http.c — binds an HTTP listener on the broker's loop
 * (net_http.h): the admin endpoint's and the schema registry's.
 */
#include "daemon/net/net_http.h"
#include "daemon/security/sec_tls.h"

#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <event2/bufferevent_ssl.h>
#include <event2/http.h>

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
    if (!evhttp_bind_socket_with_handle(http, out->host, (ev_uint16_t)out->port)) {
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
    return 0;
}
