/*
 * daemon/cluster/cluster_zk.h — the ZooKeeper session of a broker in cluster mode, as the
 * event loop sees it: asynchronous operations whose results, and watches
 * whose events, arrive as callbacks on the loop.
 *
 * The ZooKeeper C client (libzookeeper_mt) runs an I/O thread and a
 * completion thread per session.  Its callbacks only copy what they were
 * given into a message and post it to the loop (daemon/cluster/cluster_zk.c); no broker
 * state is touched off the loop, and no round trip ever runs on it.  Used
 * by the mirror (daemon/mirror.c) and the controller (daemon/controller.c).
 */
#ifndef SLUICE_ZK_H
#define SLUICE_ZK_H

#include <stdbool.h>
#include <stdint.h>

/* libzookeeper_mt: THREADED declares the synchronous calls too (cl_zk_start). */
#ifndef THREADED
#define THREADED
#endif
#include <zookeeper/zookeeper.h>

#include "daemon/broker.h"

typedef struct bk_zk bk_zk;

/* What an operation returned.  rc is ZooKeeper's (ZOK, ZNONODE,
 * ZNODEEXISTS, ZBADVERSION, ZCONNECTIONLOSS, ZSESSIONEXPIRED, ...). */
typedef struct zk_result {
    int rc;
    const char *data;                /* get: the znode's bytes (NUL-terminated copy) */
    int len;                         /* -1: the znode holds null */
    struct Stat stat;                /* get, exists, set */
    char **children;                 /* children: names, sorted */
    int nchildren;
    const int *op_rc;                /* multi: each operation's rc */
    int nops;
} zk_result;
typedef void (*zk_cb)(bk_broker *b, const zk_result *r, void *arg);

/* Session events (ZooKeeper's states): connected (a new session, or the old
 * one again after a reconnect), connecting (the connection was lost; the
 * session may survive), expired (it did not: a new session is being made). */
enum zk_session { ZK_CONNECTED, ZK_CONNECTING, ZK_EXPIRED };

typedef struct zk_hooks {
    /* new_session: the session id changed (first connect, after expiry) */
    void (*on_session)(bk_broker *b, enum zk_session s, bool new_session);
    /* A watch fired: ZOO_CREATED_EVENT, ZOO_DELETED_EVENT, ZOO_CHANGED_EVENT,
     * ZOO_CHILD_EVENT; path is relative to the chroot. */
    void (*on_watch)(bk_broker *b, int type, const char *path);
} zk_hooks;

/* Startup (before the loop runs; may block up to
 * zookeeper.connection.timeout.ms): connects, creates the chroot and
 * Kafka's persistent paths if missing.  0, or -1 with err saying what
 * went wrong in the operator's words. */
int  cl_zk_start(bk_broker *b, const zk_hooks *hooks, bk_zk **out, char *err, size_t errlen);
/* Shutdown (after the loop): closes the session, so this broker's
 * ephemeral znodes vanish at once; pending callbacks are dropped. */
void cl_zk_stop(bk_zk *zk);

/* Shutdown only (the loop has stopped; blocks up to a few seconds):
 * deletes path if it is an ephemeral znode of this session.  The close
 * request of zookeeper_close does not always reach the server (seen under
 * load), and then the cluster would wait a session timeout to learn that
 * this broker (or controller) is gone. */
void cl_zk_delete_own_now(bk_zk *zk, const char *path);

bool    cl_zk_connected(const bk_zk *zk);
int64_t cl_zk_session_id(const bk_zk *zk);
/* The connect string as configured, for log lines. */
const char *cl_zk_servers(const bk_zk *zk);
/* ZooKeeper's name of an rc, e.g. "ZNONODE (no node)". */
const char *cl_zk_rc_str(int rc);

/* Asynchronous operations.  Each calls cb(b, result, arg) exactly once on
 * the loop — also when the session is lost (rc ZCONNECTIONLOSS,
 * ZSESSIONEXPIRED) — unless cl_zk_stop runs first.  watch: leave a watch
 * (get, children: a data or child watch; exists: created/deleted/changed). */
void cl_zk_get(bk_zk *zk, const char *path, bool watch, zk_cb cb, void *arg);
/* zoo_async: the server this session talks to catches up with the leader,
 * so a read sent after it returns sees every write committed before. */
void cl_zk_sync(bk_zk *zk, const char *path, zk_cb cb, void *arg);
void cl_zk_exists(bk_zk *zk, const char *path, bool watch, zk_cb cb, void *arg);
void cl_zk_children(bk_zk *zk, const char *path, bool watch, zk_cb cb, void *arg);
/* flags: 0 or ZOO_EPHEMERAL. */
void cl_zk_create(bk_zk *zk, const char *path, const char *data, int len, int flags,
               zk_cb cb, void *arg);
void cl_zk_set(bk_zk *zk, const char *path, const char *data, int len, int version,
            zk_cb cb, void *arg);

/* A transaction (zoo_multi): all of its operations or none. */
typedef struct zk_txn zk_txn;
zk_txn *cl_zk_txn_new(void);
void cl_zk_txn_create(zk_txn *t, const char *path, const char *data, int len, int flags);
void cl_zk_txn_set(zk_txn *t, const char *path, const char *data, int len, int version);
void cl_zk_txn_delete(zk_txn *t, const char *path, int version);
void cl_zk_txn_check(zk_txn *t, const char *path, int version);
int  cl_zk_txn_count(const zk_txn *t);
/* Frees a transaction that is not sent (NULL: nothing). */
void cl_zk_txn_free(zk_txn *t);
/* Sends it and frees it; cb as above (op_rc says which operation failed). */
void cl_zk_txn_commit(bk_zk *zk, zk_txn *t, zk_cb cb, void *arg);

#endif
