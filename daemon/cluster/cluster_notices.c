/*
 * daemon/cluster/cluster_notices.c — purging Kafka's change notices, as its
 * ZkNodeChangeNotificationListener does.
 *
 *   /kafka-acl-changes/acl_changes_<seq>
 *   /kafka-acl-extended-changes/acl_changes_<seq>
 *   /config/changes/config_change_<seq>
 *
 * A notice only says "this entity changed"; every broker reads the entity
 * znodes themselves (/kafka-acl/..., /config/...), so a notice is of no use
 * once every broker has had time to see it.  Kafka deletes the ones older
 * than changeExpirationMs (15 minutes) whenever it processes
 * notifications; Sluice does the same (change.notification.expiration.ms,
 * for tests) at each new or resumed session and after each notice it
 * processes (ACLs) or writes (broker configs, users).
 *
 *   cl_notices_purge ──► children (sorted: the sequence numbers are
 *     zero-padded, so oldest first) ──► per child, oldest first:
 *       exists ──► ctime older than the expiry ──► delete ──► the next
 *              └─► younger (or any error) ──► stop: the rest are younger
 *
 * Invariants:
 *   N1. Never a round trip on the loop: every step is a callback.
 *   N2. At most one purge per folder runs; a request while it runs is
 *       dropped (the running one, or the next trigger, covers it).
 *   N3. Only notices are deleted, never an entity znode: a broker started
 *       after a purge reads every ACL, user and config from the entities.
 *       Several brokers may purge at once: a ZNONODE is someone else's
 *       delete and the walk goes on.
 */
#include "daemon/cluster/cluster.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const folders[] = { "/kafka-acl-changes", "/kafka-acl-extended-changes",
                                       "/config/changes" };
#define NFOLDERS (sizeof folders / sizeof *folders)

static bool running[NFOLDERS];       /* N2 */

typedef struct purge {
    int folder;
    char **names;
    int n, i, deleted;
} purge;

static void purge_step(bk_broker *b, purge *p);

static void purge_end(bk_broker *b, purge *p)
{
    (void)b;
    if (p->deleted)
        BK_INFO("zookeeper: %d expired change notice(s) deleted from %s", p->deleted,
                folders[p->folder]);
    running[p->folder] = false;
    for (int i = 0; i < p->n; i++)
        free(p->names[i]);
    free(p->names);
    free(p);
}

static void child_path(const purge *p, char *path, size_t cap)
{
    snprintf(path, cap, "%s/%s", folders[p->folder], p->names[p->i]);
}

static void on_deleted(bk_broker *b, const zk_result *r, void *arg)
{
    purge *p = arg;
    if (r->rc != ZOK && r->rc != ZNONODE) {
        BK_WARN("zookeeper: cannot delete an expired change notice in %s: %s",
                folders[p->folder], cl_zk_rc_str(r->rc));
        purge_end(b, p);
        return;
    }
    p->deleted += r->rc == ZOK;
    p->i++;
    purge_step(b, p);
}

static void on_stat(bk_broker *b, const zk_result *r, void *arg)
{
    purge *p = arg;
    if (r->rc == ZNONODE) {                       /* N3: another broker's purge */
        p->i++;
        purge_step(b, p);
        return;
    }
    if (r->rc != ZOK || bk_now_ms() - r->stat.ctime <= b->cfg->change_notification_expiration_ms) {
        purge_end(b, p);                          /* the rest are younger (or ZK is away) */
        return;
    }
    char path[512];
    child_path(p, path, sizeof path);
    zk_txn *t = cl_zk_txn_new();
    cl_zk_txn_delete(t, path, -1);
    cl_zk_txn_commit(b->zk, t, on_deleted, p);
}

static void purge_step(bk_broker *b, purge *p)
{
    if (p->i >= p->n) {
        purge_end(b, p);
        return;
    }
    char path[512];
    child_path(p, path, sizeof path);
    cl_zk_exists(b->zk, path, false, on_stat, p);
}

static void on_children(bk_broker *b, const zk_result *r, void *arg)
{
    purge *p = arg;
    if (r->rc == ZOK && r->nchildren > 0) {
        p->names = calloc((size_t)r->nchildren, sizeof *p->names);
        for (int i = 0; p->names && i < r->nchildren; i++)
            if ((p->names[p->n] = strdup(r->children[i])))
                p->n++;
    }
    purge_step(b, p);
}

void cl_notices_purge(bk_broker *b, const char *folder)
{
    for (size_t f = 0; f < NFOLDERS; f++) {
        if (strcmp(folders[f], folder))
            continue;
        if (running[f] || !b->zk)
            return;
        purge *p = calloc(1, sizeof *p);
        if (!p)
            return;
        p->folder = (int)f;
        running[f] = true;
        cl_zk_children(b->zk, folder, false, on_children, p);
        return;
    }
}

void cl_notices_purge_all(bk_broker *b)
{
    for (size_t f = 0; f < NFOLDERS; f++)
        cl_notices_purge(b, folders[f]);
}
