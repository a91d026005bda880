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
 *
 * With an authorizer, both endpoints learn who sent a request the same way
 * (net_http_authenticate): "Authorization: Bearer <admin.token>" is a
 * super-user; "Basic base64(user:password)" is User:<user>, checked
 * against the user's SCRAM credential as SASL PLAIN is (on a worker); no
 * Authorization, the verified TLS client certificate on an https listener
 * (User:CN=...), else User:ANONYMOUS.  Any other Authorization, or a wrong
 * password, is refused: the caller answers 401 in its own format.
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
    /* the socket's own address, numeric (a wildcard bind: its loopback):
     * where this process calls itself without a name lookup */
    char addr[64];
} net_http_bound;

/* true for localhost, 127/8 and ::1. */
bool net_http_is_loopback(const char *host);
/* Binds spec (key names its setting in errors) on b's loop into *out.
 * 0, or -1 with err (malformed, no TLS context, an explicit address
 * taken). */
int  net_http_bind(bk_broker *b, const char *key, const char *spec, const char *dflt_host,
                   int dflt_port, net_http_bound *out, char *err, size_t errlen);

struct evhttp_request;

/* The Bearer token in an Authorization header matches admin.token (never
 * when it is empty); constant time in the token's length. */
bool net_http_token_match(bk_broker *b, const char *authorization);
/* The client's address (what ACLs' host field matches); "" when unknown. */
const char *net_http_peer_host(struct evhttp_request *req);

enum net_http_who {
    NET_HTTP_REFUSED,             /* what: why (no "Error:" prefix, no newline) */
    NET_HTTP_SUPER,               /* the admin.token; what NULL */
    NET_HTTP_PRINCIPAL,           /* what: the principal, "User:..." */
};
/* What net_http_authenticate found; what lives for the call only. */
typedef void net_http_who_fn(bk_broker *b, void *arg, struct evhttp_request *req,
                             enum net_http_who who, const char *what);
/* Who sent req (see the top), then done: at once, or once a Basic login's
 * password is checked (a worker's PBKDF2); a client gone meanwhile cancels
 * the check and done never runs.  room names the caller in the log. */
void net_http_authenticate(bk_broker *b, struct evhttp_request *req, const char *room,
                           net_http_who_fn *done, void *arg);

#endif
