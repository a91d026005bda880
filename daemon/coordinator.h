/*
 * daemon/coordinator.h — the group coordinator as the rest of the daemon
 * sees it (its internals: daemon/group.h, private to daemon/group*.c).
 */
#ifndef SLUICE_COORDINATOR_H
#define SLUICE_COORDINATOR_H

#include "daemon/broker.h"

/* ---- group coordinator (daemon/group*.c) ------------------------------------ */
/* Loads groups from SQLite (they come back Empty; members rejoin), starts
 * the offsets.retention.check.interval.ms timer.  After bk_topics_load.
 * 0 or -1. */
int  bk_groups_init(bk_broker *b);
/* After bk_server_free: saves what changed, frees everything. */
void bk_groups_shutdown(bk_broker *b);
/* "Who coordinates group G": one place to ask.  Standalone: this broker. */
int32_t bk_coordinator_of(bk_broker *b, const char *group);
/* Deletes a group and its committed offsets (DeleteGroups, SQL): KP_NONE,
 * KP_NON_EMPTY_GROUP, KP_GROUP_ID_NOT_FOUND or KP_UNKNOWN_SERVER_ERROR,
 * with the reason in err. */
int bk_group_delete(bk_broker *b, const char *group_id, char *err, size_t errlen);
#endif
