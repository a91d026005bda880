/*
 * daemon/api/api_leader_hint.h — the leader hints of KIP-951: a Produce (v10+) or
 * Fetch (v16+) answered NOT_LEADER_OR_FOLLOWER carries the partition's
 * current leader (CurrentLeader) and, once per response, that leader's
 * endpoint (NodeEndpoints), so the client moves to it without a Metadata
 * round trip.
 */
#ifndef SLUICE_LEADER_HINT_H
#define SLUICE_LEADER_HINT_H

#include "daemon/view/view.h"

#define BK_HINT_MAX_NODES 16      /* distinct leaders named in one response */

typedef struct bk_hint_nodes {
    int32_t ids[BK_HINT_MAX_NODES];
    int n;
} bk_hint_nodes;

/* The live leader of the partition other than this broker: true with
 * *leader_id and *leader_epoch, the leader added to *nodes (if room);
 * false when there is none to point at (leave the defaults, -1). */
bool api_leader_hint(bk_broker *b, kp_str topic, int32_t partition,
                    int32_t *leader_id, int32_t *leader_epoch, bk_hint_nodes *nodes);
/* The endpoints of nodes->ids on listener (view_brokers_info), in that
 * order, into out[BK_HINT_MAX_NODES]; returns how many (a broker gone
 * since is left out). */
int api_hint_endpoints(bk_broker *b, const char *listener, const bk_hint_nodes *nodes,
                      bk_broker_info *out);

/* Fills ne[0..n) (a generated NodeEndpoint array: ProduceResponse's and
 * FetchResponse's have the same fields) from info[0..n). */
#define BK_HINT_FILL_ENDPOINTS(ne, info, n)                                          \
    for (int bk_i_ = 0; bk_i_ < (n); bk_i_++) {                                      \
        (ne)[bk_i_].NodeId = (info)[bk_i_].id;                                        \
        (ne)[bk_i_].Host = kp_str_cstr((info)[bk_i_].host);                           \
        (ne)[bk_i_].Port = (info)[bk_i_].port;                                        \
        (ne)[bk_i_].Rack = (info)[bk_i_].rack ? kp_str_cstr((info)[bk_i_].rack) : KP_STR_NULL; \
    }

#endif
