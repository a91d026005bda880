/*
 * daemon/net/net_http.h — an HTTP listener on the broker's loop (libevent's
 * evhttp), shared by the admin endpoint (admin/admin_http.c, admin.listeners)
 * and the schema registry (daemon/registry, schema.registry.listeners).
 *
 * A listener setting is "http://host:port", "https://host:port" or
 * "host:port"; empty means the caller's default address, which is best
 * effort (taken: the broker runs without it, said in the log); "none"
 * turns it off.  https:// serves over TLS with the Kafka listeners' ssl.*
 * settings, each connection an OpenSSL bufferevent whose handshake runs in
 * the loop.
 */
#ifndef SLUICE_NET_HTTP_H
#define SLUICE_NET_HTTP_H

#include "daemon/broker.h"

struct evhttp;

typedef struct net_http_bound {
    struct evhttp *http;          /* NULL: off ("none") or the default taken */
    char host[256];
    int port;
    bool https;
} net_http_bound;

/* true for localhost, 127/8 and ::1. */
bool net_http_is_loopback(const char *host);
/* Binds spec (key names its setting in errors) on b's loop into *out.
 * 0, or -1 with err (malformed, no TLS context, an explicit address
 * taken). */
int  net_http_bind(bk_broker *b, const char *key, const char *spec, const char *dflt_host,
                   int dflt_port, net_http_bound *out, char *err, size_t errlen);

#endif
