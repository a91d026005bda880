/*
 * daemon/replication/repl_conn.c — the inter-broker connection's socket
 * (repl_conn.h), one place for the fetchers and the peer calls.
 */
#include "daemon/replication/repl_conn.h"
#include "daemon/security/sec_tls.h"

#include <arpa/inet.h>
#include <event2/bufferevent.h>
#include <event2/bufferevent_ssl.h>
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
