/*
 * daemon/view/view_registry.h — how the one path per fact (view_topics.c) changes the two
 * registries: the cluster view (view.c) and the local replicas
 * (replica.c).  Only those three files include it; everyone else asks
 * the view through view.h.
 */
#ifndef SLUICE_VIEW_H
#define SLUICE_VIEW_H

#include "daemon/view/view.h"
#include "daemon/replica/replica.h"

void view_insert(bk_broker *b, bk_topic *t);
void view_remove(bk_broker *b, bk_topic *t);
/* Frees the view's tables (its topics were removed first). */
void view_free(bk_broker *b);

/* Opens (recovering) this broker's replica of partition idx of t, with
 * the bookmarks in mp (NULL: a new, empty log), links it into the local
 * replicas and into t->parts[idx].local.  KP_NONE or a KP_* with err. */
int  replica_open(bk_broker *b, bk_topic *t, int32_t idx, const md_partition *mp,
                     char *err, size_t errlen);
/* Unlinks and closes it; destroy: the log is deleted (topic deletion). */
void replica_close(bk_broker *b, bk_partition *p, bool destroy);

#endif
