/*
 * daemon/replication/repl_peer.c — requests to other brokers (repl_peer.h).
 * PLACEHOLDER while issue 30 is built: no connection is made; every call
 * is answered BROKER_NOT_AVAILABLE on the next loop turn.
 */
#include <event2/event.h>
#include <stdlib.h>

#include "daemon/broker.h"
#include "daemon/replication/repl_peer.h"

struct pc_later {
    repl_peer_done done;
    void *arg;
};

static void pc_fire(evutil_socket_t fd, short what, void *arg)
{
    (void)fd; (void)what;
    struct pc_later *l = arg;
    l->done(l->arg, KP_BROKER_NOT_AVAILABLE, NULL);
    free(l);
}

void repl_peer_call(bk_broker *b, int32_t broker_id, int16_t api, int16_t version,
                    const uint8_t *body, size_t len, int64_t timeout_ms,
                    repl_peer_done done, void *arg)
{
    (void)broker_id; (void)api; (void)version; (void)body; (void)len; (void)timeout_ms;
    struct pc_later *l = calloc(1, sizeof *l);
    if (!l)
        abort();
    *l = (struct pc_later){ done, arg };
    if (event_base_once(b->base, -1, EV_TIMEOUT, pc_fire, l, NULL) != 0)
        abort();
}
