/* Client listener and connections (daemon/net/net_server.c). */
#ifndef SLUICE_SERVER_H
#define SLUICE_SERVER_H

#include <stddef.h>

struct bk_broker;
typedef struct bk_server bk_server;

/* Binds listeners= and starts accepting.  0 or -1 with err. */
int  net_server_start(struct bk_broker *b, char *err, size_t errlen);
/* Shutdown, step 1: stop accepting and reading new requests; leaves the
 * event loop once deferred requests have answered (bounded). */
void net_server_drain(struct bk_broker *b);
/* Shutdown, step 2: closes every connection. */
void net_server_free(struct bk_broker *b);

#endif
