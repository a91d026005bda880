/*
 * daemon/replication/repl_conn.c — the inter-broker connection's socket
 * (repl_conn.h), one place for the fetchers and the peer calls.
 */
#include "daemon/replication/repl_conn.h"
#include "daemon/security/sec_tls.h"

#include <arpa/inet.h>
#include <event2/bufferevent.h>
#include <event2/bufferevent_ssl.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <stdio.h>

struct bufferevent *repl_conn_new(bk_broker *b, const char *host, char *err, size_t errlen,
                                  const char **why)
{
    const bk_listener *ib = &b->cfg->listeners[b->cfg->inter_broker_listener];
    struct bufferevent *bev;
    if (ib->proto == BK_SEC_SSL || ib->proto == BK_SEC_SASL_SSL) {
        SSL_CTX *ctx = sec_tls_client_ctx(b, err, errlen);
        SSL *ssl = ctx ? SSL_new(ctx) : NULL;
        if (!ssl) {
            *why = ctx ? "cannot make a TLS connection" : err;
            return NULL;
        }
        struct in6_addr ip;           /* SNI names hosts, never addresses (RFC 6066) */
        if (inet_pton(AF_INET, host, &ip) != 1 && inet_pton(AF_INET6, host, &ip) != 1)
            SSL_set_tlsext_host_name(ssl, host);
        if (b->cfg->ssl_endpoint_identification_algorithm[0])
            SSL_set1_host(ssl, host);
        bev = bufferevent_openssl_socket_new(b->base, -1, ssl, BUFFEREVENT_SSL_CONNECTING,
                                             BEV_OPT_CLOSE_ON_FREE);
        if (bev)                        /* EOF without close_notify is EOF */
            bufferevent_openssl_set_allow_dirty_shutdown(bev, 1);
        else
            SSL_free(ssl);
    } else {
        bev = bufferevent_socket_new(b->base, -1, BEV_OPT_CLOSE_ON_FREE);
    }
    if (!bev)
        *why = "cannot create a socket";
    return bev;
}

const char *repl_conn_event_why(struct bufferevent *bev, short what, const char *eof,
                                char *buf, size_t len)
{
    unsigned long tls_err = bufferevent_get_openssl_error(bev);    /* 0: not TLS */
    if (what & BEV_EVENT_TIMEOUT)
        return "no answer in time";
    if (tls_err) {
        snprintf(buf, len, "TLS: ");
        ERR_error_string_n(tls_err, buf + 5, len - 5);
        return buf;
    }
    return what & BEV_EVENT_EOF ? eof : "connection error";
}
