/*
 * daemon/cluster/cluster_logdirs.c — the controller's half of Kafka's log-dir failure
 * handling (KafkaController.onBrokerLogDirFailure): a broker whose log
 * directory failed (daemon/replica/replica_logdir.c) writes the persistent sequential
 * /log_dir_event_notification/log_dir_event_<seq> holding
 * {"version":1,"broker":<id>,"event":1}; the controller watches that
 * path, and for each notification:
 *
 *   read it ──► event 1 from a live broker: remember the broker as
 *               offline-dir in its current registration, reconcile every
 *               topic (cluster_leaders.c treats it as it treats a broker in
 *               its controlled shutdown: its leaderships move to another
 *               eligible ISR member, leader epoch + 1; it leaves every ISR
 *               of a live leader; it is never made leader) ──► delete the
 *               notification
 *
 * With one log directory per broker every replica of that broker is on
 * the failed directory, so the notification alone says which replicas
 * are offline (Kafka learns it from the broker's LeaderAndIsr answers).
 *
 * Invariants:
 *   G1. A broker stays offline-dir only while its registration is the one
 *       it had when the notification was handled: a restart registers
 *       anew (a new registration czxid), and then it fetches, catches up and rejoins the
 *       ISR as any follower does.  Brokers that went are dropped.
 *   G2. A notification is deleted only after it was applied (or is not
 *       one we act on: malformed, another event, a broker not alive); a
 *       new controller reads the ones left.  The failed broker also
 *       writes a new one when the controller changes (replica_logdir.c), so what
 *       a controller remembers in memory is never all there is.
 *   G3. Every state write goes through reconcile_topic (cluster_controller.c
 *       C1-C3): nothing here writes a state znode.
 *   G4. A notification older than the broker's current registration (its
 *       znode's czxid below the registration's: written before a restart,
 *       and no controller handled it then) is deleted unused: the
 *       restarted broker's directory is not the one that failed.  Both are
 *       ZooKeeper's ids, so no broker's clock enters the comparison (a
 *       registration's "timestamp" is the broker's own wall clock).
 */
#include "daemon/cluster/cluster.h"
#include "daemon/replica/replica_logdir.h"

#include "daemon/replication/repl_fetcher.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define LD_EVENTS "/log_dir_event_notification"
#define LD_EVENT_FAILURE 1

static struct {
    int32_t id[CL_MAX_BROKERS];
    int64_t reg_czxid[CL_MAX_BROKERS];  /* the registration it failed in (G1) */
    int n;
} offline;

static int64_t registration_of(bk_cluster *cl, int32_t id, bool *alive)
{
    for (int i = 0; i < cl->nbrokers; i++)
        if (cl->brokers[i].id == id) {
            *alive = true;
            return cl->brokers[i].czxid;  /* 0: unknown */
        }
    *alive = false;
    return 0;
}

bool cl_broker_dir_failed(bk_broker *b, int32_t id)
{
    bk_cluster *cl = b->cl;
    if (!cl || !cl->active || offline.n == 0)
        return false;
    for (int i = 0; i < offline.n; i++) {
        if (offline.id[i] != id)
            continue;
        bool alive;
        int64_t reg = registration_of(cl, id, &alive);
        if (alive && reg == offline.reg_czxid[i])
            return true;
        offline.id[i] = offline.id[offline.n - 1];             /* G1 */
        offline.reg_czxid[i] = offline.reg_czxid[--offline.n];
        return false;
    }
    return false;
}

static void on_deleted(bk_broker *b, const zk_result *r, void *arg)
{
    (void)b; (void)r; (void)arg;     /* NONODE: another controller took it; else read again */
}

static void delete_event(bk_broker *b, const char *path)
{
    zk_txn *txn = cl_zk_txn_new();
    cl_zk_txn_delete(txn, path, -1);
    cl_zk_txn_commit(b->zk, txn, on_deleted, NULL);
}

static void on_event(bk_broker *b, const zk_result *r, void *arg)
{
    char *path = arg;
    bk_cluster *cl = b->cl;
    if (!cl || !cl->active || r->rc != ZOK) {
        free(path);                  /* gone, or the session: a new controller reads it */
        return;
    }
    int32_t id = -1, event = -1;
    char err[256];
    if (cl_zj_log_dir_event_parse(r->data ? r->data : "", r->len > 0 ? (size_t)r->len : 0, &id,
                               &event, err, sizeof err) != 0) {
        BK_WARN("controller: %s is not Kafka's log dir event JSON (%s); deleted", path, err);
    } else if (event != LD_EVENT_FAILURE) {
        BK_WARN("controller: %s: log dir event %d of broker %d is not one Sluice knows; "
                "deleted", path, (int)event, (int)id);
    } else {
        bool alive;
        int64_t reg = registration_of(cl, id, &alive);
        if (!alive) {
            BK_INFO("controller: broker %d reported a failed log directory and is gone "
                    "already", (int)id);
        } else if (reg > 0 && r->stat.czxid < reg) {                         /* G4 */
            BK_INFO("controller: %s predates broker %d's registration (a restart); "
                    "deleted", path, (int)id);
        } else if (!cl_broker_dir_failed(b, id) && offline.n < CL_MAX_BROKERS) {
            offline.id[offline.n] = id;
            offline.reg_czxid[offline.n++] = reg;
            BK_WARN("controller: broker %d reported a failed log directory: its replicas "
                    "are offline; moving its leaderships and taking it out of the ISRs",
                    (int)id);
            cl_ctl_reconcile(b, NULL);
        }
    }
    delete_event(b, path);                                       /* G2 */
    free(path);
}

static void on_events(bk_broker *b, const zk_result *r, void *arg)
{
    (void)arg;
    bk_cluster *cl = b->cl;
    if (!cl || !cl->active || r->rc != ZOK)
        return;
    for (int i = 0; i < r->nchildren; i++) {
        size_t n = strlen(LD_EVENTS) + strlen(r->children[i]) + 2;
        char *path = malloc(n);
        if (!path)
            return;                  /* the next watch or controller reads them */
        snprintf(path, n, "%s/%s", LD_EVENTS, r->children[i]);
        cl_zk_get(b->zk, path, false, on_event, path);
    }
}

void cl_ctl_logdirs_refresh(bk_broker *b)
{
    bk_cluster *cl = b->cl;
    if (cl && cl->active && b->zk)
        cl_zk_children(b->zk, LD_EVENTS, true, on_events, NULL);
}

bool cl_ctl_logdirs_path(const char *path)
{
    return !strcmp(path, LD_EVENTS);
}

/* A new controller starts with nothing remembered (G2); if its own log
 * directory failed, it tells itself, as any other broker would tell it. */
void cl_ctl_logdirs_reset(bk_broker *b)
{
    offline.n = 0;
    cl_logdir_renotify(b);
}

/* ---- the failed broker's half: telling the controller (replica_logdir.c's note) --------- */

#define LOGDIR_EVENT_PATH "/log_dir_event_notification/log_dir_event_"
#define LOGDIR_EVENT_FAILURE 1           /* Kafka's LogDirFailure */

static bool notify_pending;              /* the controller still to be told */
static bool notify_in_flight;

static void on_event_created(bk_broker *b, const zk_result *r, void *arg)
{
    (void)arg;
    notify_in_flight = false;
    if (r->rc == ZOK) {
        BK_INFO("log directory %s: the controller is told (%s)", b->data_dir,
                LOGDIR_EVENT_PATH "<seq>");
        return;
    }
    /* Connection lost or the session expired: the next controller change
     * or cluster tick writes it again (a duplicate is harmless: the
     * controller's handling is idempotent).  Said once, not every tick. */
    static bool warned;
    if (!warned)
        BK_WARN("log directory %s: cannot tell the controller yet (%s); retrying",
                b->data_dir, cl_zk_rc_str(r->rc));
    warned = true;
    notify_pending = true;
}

void cl_logdir_renotify(bk_broker *b)
{
    if (!replica_logdir_failed() || !b->cl || !b->zk)
        return;
    notify_pending = true;
    if (notify_in_flight || !cl_zk_connected(b->zk))
        return;
    kp_buf out;
    kp_buf_init(&out);
    if (cl_zj_log_dir_event_format(b->cfg->broker_id, LOGDIR_EVENT_FAILURE, &out) == 0) {
        notify_pending = false;
        notify_in_flight = true;
        cl_zk_create(b->zk, LOGDIR_EVENT_PATH, (const char *)out.data, (int)out.len,
                  ZOO_SEQUENCE, on_event_created, NULL);
    }
    kp_buf_free(&out);
}

/* b->on_logdir_failed in cluster mode (installed by cl_start): this
 * broker follows nothing from now on, and the controller is told. */
void cl_logdir_failed(bk_broker *b)
{
    repl_fetchers_update(b);
    cl_logdir_renotify(b);
}

/* The cluster tick: a notification that could not be written. */
void cl_logdir_tick(bk_broker *b)
{
    if (notify_pending)
        cl_logdir_renotify(b);
}
