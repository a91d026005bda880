/*
 * daemon/cluster/cluster_broker_configs.c — dynamic broker configs in cluster mode:
 * ZooKeeper holds them, as in Kafka; each broker's SQLite (broker_configs)
 * is its local copy (daemon/view/view_broker_configs.c applies and stores them).
 *
 *   /config/brokers/<default>   the cluster-wide default ("" resource)
 *   /config/brokers/<id>        one broker's own set
 *       {"version":1,"config":{"log.retention.ms":"1000"}}
 *   /config/changes/config_change_NNNNNNNNNN   (persistent sequential)
 *       {"version":2,"entity_path":"brokers/<id>"}   for Kafka's tools
 *
 * Write (AlterConfigs / IncrementalAlterConfigs on the broker that took
 * it, after view_broker_configs.c validated the whole set):
 *
 *   cbc_write ──► multi: set (at the version last read; create when there
 *                 was none) + the change notification
 *     ZOK ──► cbc_read (get + watch) ──► adopted here ──► op->done(NONE)
 *     ZBADVERSION / ZNODEEXISTS / ZNONODE ──► "changed meanwhile; try
 *                 again" (the read it raced brings the other write)
 *
 * Read (every broker, for the two znodes that concern it): at each session
 * (re)connect (cluster_session.c) and when a watch on either fires
 * (cluster_mirror.c's cl_mirror_on_watch): get with a watch; a missing znode gets an
 * exists watch (for its creation) and is read again if it appeared
 * meanwhile.  What was read replaces the local set (view_broker_configs_adopt:
 * stored in SQLite, applied to every topic), a missing znode the empty set.
 *
 * Invariants:
 *   K1. The ZooKeeper znode is the truth: a broker applies a set only as
 *       read from it (a write's own answer included), so every broker ends
 *       with the same default set, whichever broker wrote it.
 *   K2. A write is answered only after ZooKeeper confirmed it and this
 *       broker applied it: a DescribeConfigs after the answer shows it.
 *   K3. No call waits on ZooKeeper: every step is a callback on the loop.
 */
#include "daemon/cluster/cluster.h"
#include "daemon/view/view_broker_configs.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CBC_DEFAULT "<default>"

/* The znode versions last read, per resource (0: default, 1: own); -1
 * when it did not exist.  Loop thread only. */
static int cbc_version[2] = { -1, -1 };

typedef struct cbc_read_ctx {
    int which;                        /* 0 default, 1 own */
    bk_topic_op *op;                  /* a write's answer, or NULL */
} cbc_read_ctx;

static void cbc_path(bk_broker *b, int which, char *path, size_t cap)
{
    if (which == 0)
        snprintf(path, cap, "/config/brokers/" CBC_DEFAULT);
    else
        snprintf(path, cap, "/config/brokers/%d", (int)b->cfg->broker_id);
}

static void cbc_read(bk_broker *b, int which, bk_topic_op *op);

static void cbc_answer(cbc_read_ctx *c, int rc, const char *err)
{
    if (c->op)
        c->op->done(c->op, rc, err);
    free(c);
}

static void on_exists(bk_broker *b, const zk_result *r, void *arg)
{
    cbc_read_ctx *c = arg;
    if (r->rc == ZOK)                 /* created between the get and now */
        cbc_read(b, c->which, NULL);
    free(c);
}

static void on_read(bk_broker *b, const zk_result *r, void *arg)
{
    cbc_read_ctx *c = arg;
    char path[64], err[256];
    const char *resource = c->which == 0 ? "" : path;
    md_kv *kv = NULL;
    size_t n = 0;
    if (c->which == 1)
        snprintf(path, sizeof path, "%d", (int)b->cfg->broker_id);
    if (r->rc == ZOK) {
        if (r->len > 0 && cl_zj_config_parse(r->data, (size_t)r->len, &kv, &n, err,
                                           sizeof err) != 0) {
            BK_ERROR("zookeeper: /config/brokers/%s is not Kafka's config JSON (%s); "
                     "ignored until it is fixed", c->which ? path : CBC_DEFAULT, err);
            cbc_answer(c, KP_UNKNOWN_SERVER_ERROR, "The stored broker configs are not valid.");
            return;
        }
        cbc_version[c->which] = r->stat.version;
    } else if (r->rc == ZNONODE) {
        cbc_version[c->which] = -1;
        cbc_read_ctx *e = calloc(1, sizeof *e);
        if (e) {
            char zpath[64];
            e->which = c->which;
            cbc_path(b, c->which, zpath, sizeof zpath);
            cl_zk_exists(b->zk, zpath, true, on_exists, e);
        }
    } else {
        /* Connection lost or session gone: the next session reads again. */
        int rc = cl_zk_error(b, r->rc, "cannot read the broker configs", err, sizeof err);
        cbc_answer(c, rc, err);
        return;
    }
    int rc = view_broker_configs_adopt(b, resource, kv, n);
    md_kv_free(kv, n);
    cbc_answer(c, rc, rc == KP_NONE ? NULL : "Cannot store the broker configs.");
}

static void cbc_read(bk_broker *b, int which, bk_topic_op *op)
{
    cbc_read_ctx *c = calloc(1, sizeof *c);
    if (!c) {
        if (op)
            op->done(op, KP_UNKNOWN_SERVER_ERROR, "out of memory");
        return;
    }
    c->which = which;
    c->op = op;
    char path[64];
    cbc_path(b, which, path, sizeof path);
    cl_zk_get(b->zk, path, true, on_read, c);
}

void cl_broker_configs_refresh(bk_broker *b)
{
    cbc_read(b, 0, NULL);
    cbc_read(b, 1, NULL);
}

bool cl_broker_configs_path(const char *path)
{
    return !strncmp(path, "/config/brokers/", 16);
}

typedef struct cbc_write_ctx {
    int which;
    bk_topic_op *op;
} cbc_write_ctx;

static void on_written(bk_broker *b, const zk_result *r, void *arg)
{
    cbc_write_ctx *w = arg;
    char err[400];
    if (r->rc == ZOK) {
        char path[64];
        cbc_path(b, w->which, path, sizeof path);
        BK_INFO("dynamic broker configs: %s changed in ZooKeeper", path);
        cl_notices_purge(b, "/config/changes");
        cbc_read(b, w->which, w->op);             /* K2: answered once applied */
        free(w);
        return;
    }
    int rc;
    if (r->rc == ZBADVERSION || r->rc == ZNODEEXISTS || r->rc == ZNONODE) {
        snprintf(err, sizeof err, "The broker configs changed meanwhile; try again.");
        rc = KP_INVALID_REQUEST;
        cbc_read(b, w->which, NULL);              /* the write it raced */
    } else {
        rc = cl_zk_error(b, r->rc, "cannot change the broker configs", err, sizeof err);
    }
    BK_WARN("dynamic broker configs: %s", err);
    if (w->op)
        w->op->done(w->op, rc, err);
    free(w);
}

int cl_broker_configs_write(bk_broker *b, const char *resource, const md_kv *kv, size_t n,
                            bk_topic_op *op, char *err, size_t errlen)
{
    if (!cl_zk_connected(b->zk))
        return cl_zk_error(b, ZCONNECTIONLOSS, "cannot change the broker configs", err,
                           errlen);
    int which = resource[0] ? 1 : 0;
    char path[64];
    cbc_path(b, which, path, sizeof path);
    kp_buf cfg, note;
    kp_buf_init(&cfg);
    kp_buf_init(&note);
    cl_zj_config_format(kv, n, &cfg);
    cl_zj_config_change_format(which ? path + strlen("/config/") : "brokers/" CBC_DEFAULT, &note);
    zk_txn *t = cl_zk_txn_new();
    if (cbc_version[which] >= 0)
        cl_zk_txn_set(t, path, (const char *)cfg.data, (int)cfg.len, cbc_version[which]);
    else
        cl_zk_txn_create(t, path, (const char *)cfg.data, (int)cfg.len, 0);
    cl_zk_txn_create(t, "/config/changes/config_change_", (const char *)note.data,
                  (int)note.len, ZOO_SEQUENCE);
    kp_buf_free(&cfg);
    kp_buf_free(&note);
    cbc_write_ctx *w = calloc(1, sizeof *w);
    if (!w)
        abort();
    w->which = which;
    w->op = op;
    if (op)
        op->pending = true;
    cl_zk_txn_commit(b->zk, t, on_written, w);
    return KP_NONE;
}
