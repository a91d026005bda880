/*
 * daemon/api/api_leader_hint.c — CurrentLeader / NodeEndpoints for
 * NOT_LEADER_OR_FOLLOWER answers (daemon/api/api_leader_hint.h).  Only on the
 * error path: a lookup in the view per failed partition.
 */
#include "daemon/api/api_leader_hint.h"

bool api_leader_hint(bk_broker *b, kp_str topic, int32_t partition,
                    int32_t *leader_id, int32_t *leader_epoch, bk_hint_nodes *nodes)
{
    const bk_pview *pv = view_partition(b, topic, partition);
    if (!pv || pv->leader < 0 || pv->leader == b->cfg->broker_id ||
        !view_broker_alive(b, pv->leader))
        return false;
    *leader_id = pv->leader;
    *leader_epoch = pv->leader_epoch;
    for (int i = 0; i < nodes->n; i++)
        if (nodes->ids[i] == pv->leader)
            return true;
    if (nodes->n < BK_HINT_MAX_NODES)
        nodes->ids[nodes->n++] = pv->leader;
    return true;
}

int api_hint_endpoints(bk_broker *b, const char *listener, const bk_hint_nodes *nodes,
                      bk_broker_info *out)
{
    bk_broker_info all[BK_HINT_MAX_NODES * 4];
    int nall = view_brokers_info(b, listener, all, (int)(sizeof all / sizeof all[0]));
    int n = 0;
    for (int i = 0; i < nodes->n; i++)
        for (int j = 0; j < nall; j++)
            if (all[j].id == nodes->ids[i]) {
                out[n++] = all[j];
                break;
            }
    return n;
}
