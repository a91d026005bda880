/*
 * daemon/view/view_registry.h — how the one path per fact (view_topics.c) changes the two
 * registries: the cluster view (view.c) and the local replicas
 * (replica.c).  Only those three files include it; everyone else asks
 * the view through view.h.
 */
#ifndef SLUICE_VIEW_H
#define SLUICE_VIEW_H

#include "daemon/view/view.h"

void view_insert(bk_broker *b, bk_topic *t);
void view_remove(bk_broker *b, bk_topic *t);
/* Frees the view's tables (its topics were removed first). */
void view_free(bk_broker *b);

/* The local replicas, as the view drives them: replica.c's, installed by
 * replica_install (main.c), as b->isr is by repl_isr_install; NULL: the
 * view opens none (a view-only broker, as the unit tests build).
 * open: this broker's replica of partition idx of t, with the bookmarks
 *   in mp (NULL: a new, empty log), linked into the local replicas and
 *   into t->parts[idx].local.  KP_NONE or a KP_* with err.
 * close: unlinks and closes it; destroy: the log is deleted.
 * view_changed: the view's leader epoch, ISR or leader of p changed
 *   (opened: p was just opened, its recovered history is saved).
 * reconfigure: the topic's configs changed; sc is its log's new config.
 * held: p is held back from leading (replica.h). */
typedef struct view_replica_hooks {
    int  (*open)(bk_broker *b, bk_topic *t, int32_t idx, const md_partition *mp,
                 char *err, size_t errlen);
    void (*close)(bk_broker *b, bk_partition *p, bool destroy);
    void (*view_changed)(bk_broker *b, bk_partition *p, int32_t leader_epoch, bool opened);
    void (*reconfigure)(bk_partition *p, const seg_config *sc);
    bool (*held)(const bk_partition *p);
} view_replica_hooks;

#endif
