/*
 * daemon/security/sec_peer.h — who is at the other end of a Kafka connection.
 *
 * The seam between the transport (listeners, TLS: daemon/net/net_server.c), the
 * authentication (SASL) and the authorizer (ACLs).  Each connection comes
 * in through one listener, whose security protocol says what the client
 * must do before its requests are served; its principal is what the
 * authorizer checks.
 *
 * Invariants:
 *   1. A connection's principal is "User:ANONYMOUS" (Kafka's) until TLS
 *      client authentication or SASL names someone else; it is never
 *      empty.
 *   2. The security protocol is fixed at accept, from the listener.
 */
#ifndef SLUICE_SECURITY_H
#define SLUICE_SECURITY_H

#include <stdbool.h>

#include "daemon/broker_config.h"          /* bk_secproto */

typedef struct bk_conn bk_conn;

#define BK_PRINCIPAL_ANONYMOUS "User:ANONYMOUS"
#define BK_PRINCIPAL_MAX 256

bk_secproto net_conn_secproto(const bk_conn *c);
/* The authenticated principal, "User:name" (inv. 1). */
const char *net_conn_principal(const bk_conn *c);
void net_conn_set_principal(bk_conn *c, const char *principal);
/* The client's address alone (no port): what ACLs' host field matches. */
const char *net_conn_host(const bk_conn *c);
/* The name of the listener c came through ("PLAINTEXT", "INTERNAL", ...);
 * NULL for a request on no connection. */
const char *net_conn_listener(const bk_conn *c);

#endif
