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
        if (!(bev = sec_tls_client_bev(b, host, err, errlen, why)))
            return NULL;
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
