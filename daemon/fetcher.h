/*
 * daemon/fetcher.h — the replica fetchers (daemon/fetcher.c): in cluster
 * mode, every local replica led by another live broker is copied from its
 * leader with Kafka's Fetch (ReplicaId = broker.id), one connection and
 * one long-polled request per leader.  Standalone mode starts none.
 */
#ifndef SLUICE_FETCHER_H
#define SLUICE_FETCHER_H

#include "daemon/cluster.h"

/* cl_start / cl_stop: no fetcher runs before start or after stop. */
int  bk_fetchers_start(bk_broker *b);
void bk_fetchers_stop(bk_broker *b);
/* The view changed (a topic applied, the live brokers changed): the set
 * of followed partitions is recomputed once, on the next loop turn, for a
 * burst of calls.  Responses are checked against the view as it is when
 * they arrive, so nothing waits for that turn to be safe. */
void bk_fetchers_update(bk_broker *b);

/* ---- pure pieces (unit tested) ---------------------------------------------- */
/* This broker (self) follows a partition iff it hosts a replica of it and
 * another broker, alive, leads it. */
bool bk_follow_wanted(const bk_pview *v, int32_t self, bool leader_alive);
/* The longest prefix of buf made of whole batches (a leader may end a
 * response with a partial one, as Kafka's do): returns its length and
 * the records the batches' headers count (*records, may be NULL). */
size_t bk_fetch_whole_batches(const uint8_t *buf, size_t len, int64_t *records);

#endif
