/*
 * daemon/replication/repl_conn.h — a connection to another broker's
 * endpoint on the inter-broker listener, as the replica fetchers
 * (repl_fetcher.c) and the peer calls (repl_peer.c) both make it: TLS
 * through libevent's OpenSSL filter when the listener is SSL or SASL_SSL
 * (SNI for host names, the host checked against the certificate unless
 * ssl.endpoint.identification.algorithm is empty), plain otherwise.  The
 * SASL login on a SASL_* listener is the caller's (sec_sasl_client.h);
 * an event's reason is sec_tls_event_why's (sec_tls.h).
 */
#ifndef SLUICE_REPL_CONN_H
#define SLUICE_REPL_CONN_H

#include <stddef.h>

#include "daemon/broker.h"

struct bufferevent;

/* A new unconnected bufferevent (BEV_OPT_CLOSE_ON_FREE) for host on the
 * inter-broker listener's protocol; NULL with why set (a static string or
 * the TLS context's error in err). */
struct bufferevent *repl_conn_new(bk_broker *b, const char *host, char *err, size_t errlen,
                                  const char **why);

#endif
