/*
 * daemon/cluster/cluster_zk.c — the broker's ZooKeeper session (cluster mode): the C
 * client's threads on one side, the event loop on the other.
 *
 *   loop: cl_zk_get(path, cb) ──► zoo_aget ──► I/O thread ──► server
 *                                             │
 *   loop: cb(result) ◄── on_posted ◄─event_active─ completion thread: copy
 *                                                   the result into a zk_msg,
 *                                                   queue it
 *
 * Watches and session events take the same way (the global watcher posts a
 * zk_msg).  The zoo_a* calls themselves only queue a request and return.
 *
 * Sessions.  cl_zk_start connects before the loop runs (bounded by
 * zookeeper.connection.timeout.ms: a bad zookeeper.connect is a startup
 * error, never a hang).  A lost connection is the client's business: it
 * reconnects and keeps the session if it can (ZK_CONNECTING, then
 * ZK_CONNECTED).  An expired session cannot be revived: a thread of ours
 * closes the dead handle and makes a new one (zookeeper_close and the DNS
 * lookup in zookeeper_init may block, so never on the loop), then
 * ZK_CONNECTED arrives with new_session.
 *
 * Invariants:
 *   Z1. Every operation's callback runs exactly once, on the loop; a
 *       request made while there is no handle (between an expiry and the
 *       new session) gets rc ZINVALIDSTATE the same way.  cl_zk_stop keeps it
 *       too: what is queued or still in flight when the session closes
 *       completes there with ZCLOSING, so every caller frees what it holds
 *       (in-flight operations are linked in zk->ops until they complete).
 *   Z2. Callbacks from a replaced handle never pass as the current one's:
 *       the watcher drops session events and watches of a handle that is
 *       not zk->zh (results still complete their callers, Z1).
 *   Z3. Only the loop reads or writes connected/session_id.  zk->zh is
 *       replaced under both hmu and mu: the loop calls the client under
 *       hmu (so a handle is never closed under a call), the client's
 *       threads compare against it under mu and never take hmu (so a
 *       callback cannot deadlock with a call).
 */
#include "daemon/cluster/cluster_zk.h"

#include <errno.h>
#include <event2/event.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

enum { M_RESULT, M_WATCH, M_SESSION };

typedef struct zk_msg {
    struct zk_msg *next;
    int kind;
    zk_cb cb;
    void *arg;
    zk_result r;
    char *data;                      /* owned copies */
    zk_txn *txn;                     /* multi: freed after cb */
    int type, state;                 /* watch / session */
    int64_t session_id;
    char *path;
} zk_msg;

struct zk_txn {
    zoo_op_t *ops;
    zoo_op_result_t *res;
    char **bufs;                     /* paths and data the ops point at */
    int n, cap, nbufs;
    int *op_rc;
};

typedef struct op_ctx {
    struct op_ctx *prev, *next;      /* bk_zk.ops */
    bk_zk *zk;
    zk_cb cb;
    void *arg;
    zk_txn *txn;
} op_ctx;

struct bk_zk {
    bk_broker *b;
    zk_hooks hooks;
    char servers[1024];              /* zookeeper.connect, chroot included */
    int timeout_ms;
    pthread_mutex_t hmu;             /* held while the loop uses zh, and to swap it */
    pthread_mutex_t mu;              /* the queue, zh_state; zh is swapped under both */
    pthread_cond_t cv;               /* cl_zk_start waits for the first session */
    zhandle_t *zh;                   /* NULL between an expiry and the new handle */
    int zh_state;                    /* last session state of zh (mu) */
    zk_msg *head, *tail;             /* posted, not yet taken by the loop (mu) */
    struct op_ctx *ops;              /* issued, not yet completed (mu; Z1) */
    struct event *ev;                /* on_posted; event_active from any thread */
    bool stopping;
    bool reinit_running;             /* a reinit thread exists (loop) */
    pthread_t reinit;
    /* loop only (Z3) */
    bool connected;
    int64_t session_id;
};

/* ---- the client's log, through ours ------------------------------------------------ */

/* The client logs every failed connection attempt; while ZooKeeper is
 * down that is several lines a second.  One line per 10 s per message. */
static void client_log(const char *message)
{
    static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
    static char last[160];
    static time_t last_at;
    const char *m = strstr(message, "):");    /* skip the client's own prefix */
    m = m ? m + 2 : message;
    while (*m == ' ')
        m++;
    time_t now = time(NULL);
    pthread_mutex_lock(&mu);
    bool same = !strncmp(last, m, 40) && now - last_at < 10;
    if (!same) {
        snprintf(last, sizeof last, "%s", m);
        last_at = now;
    }
    pthread_mutex_unlock(&mu);
    if (!same)
        BK_WARN("zookeeper client: %.*s", (int)strcspn(m, "\n"), m);
}

/* ---- posting to the loop (any thread) ----------------------------------------------- */

static void post(bk_zk *zk, zk_msg *m)
{
    pthread_mutex_lock(&zk->mu);
    if (zk->tail)
        zk->tail->next = m;
    else
        zk->head = m;
    zk->tail = m;
    pthread_mutex_unlock(&zk->mu);
    /* The loop's one way to be woken from another thread (daemon/worker.h):
     * activations before on_posted runs are one run, which takes them all. */
    event_active(zk->ev, EV_READ, 0);
}

static void msg_free(zk_msg *m)
{
    free(m->data);
    free(m->path);
    if (m->r.children) {
        for (int i = 0; i < m->r.nchildren; i++)
            free(m->r.children[i]);
        free(m->r.children);
    }
    cl_zk_txn_free(m->txn);
    free(m);
}

void cl_zk_txn_free(zk_txn *t)
{
    if (!t)
        return;
    for (int i = 0; i < t->nbufs; i++)
        free(t->bufs[i]);
    free(t->bufs);
    free(t->ops);
    free(t->res);
    free(t->op_rc);
    free(t);
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static void on_posted(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    bk_zk *zk = arg;
    pthread_mutex_lock(&zk->mu);
    zk_msg *m = zk->head;
    zk->head = zk->tail = NULL;
    pthread_mutex_unlock(&zk->mu);
    for (zk_msg *next; m; m = next) {
        next = m->next;
        if (m->kind == M_RESULT) {
            m->cb(zk->b, &m->r, m->arg);
        } else if (m->kind == M_WATCH) {
            if (zk->hooks.on_watch)
                zk->hooks.on_watch(zk->b, m->type, m->path);
        } else if (m->state == ZOO_CONNECTED_STATE) {
            bool fresh = m->session_id != zk->session_id;
            zk->connected = true;
            zk->session_id = m->session_id;
            zk->hooks.on_session(zk->b, ZK_CONNECTED, fresh);
        } else if (m->state == ZOO_EXPIRED_SESSION_STATE ||
                   m->state == ZOO_AUTH_FAILED_STATE) {
            zk->connected = false;
            zk->hooks.on_session(zk->b, ZK_EXPIRED, false);
        } else if (zk->connected) {
            zk->connected = false;
            zk->hooks.on_session(zk->b, ZK_CONNECTING, false);
        }
        msg_free(m);
    }
}

/* ---- the session ---------------------------------------------------------------------- */

static void *reinit_main(void *arg);

static void watcher(zhandle_t *zh, int type, int state, const char *path, void *ctx)
{
    bk_zk *zk = ctx;
    pthread_mutex_lock(&zk->mu);
    bool current = zh == zk->zh;              /* Z2 */
    if (current && type == ZOO_SESSION_EVENT)
        zk->zh_state = state;
    pthread_cond_broadcast(&zk->cv);
    pthread_mutex_unlock(&zk->mu);
    if (!current)
        return;
    zk_msg *m = calloc(1, sizeof *m);
    if (!m)
        return;                               /* a lost watch; resyncs cover it */
    if (type == ZOO_SESSION_EVENT) {
        m->kind = M_SESSION;
        m->state = state;
        const clientid_t *id = zoo_client_id(zh);
        m->session_id = id ? id->client_id : 0;
    } else {
        m->kind = M_WATCH;
        m->type = type;
        m->path = strdup(path ? path : "");
    }
    post(zk, m);
}

static zhandle_t *new_handle(bk_zk *zk, const char *servers)
{
    return zookeeper_init2(servers, watcher, zk->timeout_ms, NULL, zk, 0, client_log);
}

/* Blocks (startup only) until zh's session is up or timeout_ms pass. */
static int wait_connected(bk_zk *zk, int timeout_ms)
{
    struct timespec dl;
    clock_gettime(CLOCK_REALTIME, &dl);
    dl.tv_sec += timeout_ms / 1000;
    dl.tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
    if (dl.tv_nsec >= 1000000000L) {
        dl.tv_sec++;
        dl.tv_nsec -= 1000000000L;
    }
    pthread_mutex_lock(&zk->mu);
    while (zk->zh_state != ZOO_CONNECTED_STATE && zk->zh_state != ZOO_EXPIRED_SESSION_STATE &&
           zk->zh_state != ZOO_AUTH_FAILED_STATE)
        if (pthread_cond_timedwait(&zk->cv, &zk->mu, &dl) == ETIMEDOUT)
            break;
    int st = zk->zh_state;
    pthread_mutex_unlock(&zk->mu);
    return st == ZOO_CONNECTED_STATE ? 0 : -1;
}

/* Puts nh in place of the current handle (Z3) and returns the old one.
 * nh is made under the locks, so it is current before its first event
 * (Z2). */
static zhandle_t *swap_handle(bk_zk *zk, const char *servers)
{
    pthread_mutex_lock(&zk->hmu);
    pthread_mutex_lock(&zk->mu);
    zhandle_t *old = zk->zh;
    zk->zh_state = 0;
    zk->zh = servers ? new_handle(zk, servers) : NULL;
    pthread_mutex_unlock(&zk->mu);
    pthread_mutex_unlock(&zk->hmu);
    return old;
}

static void *reinit_main(void *arg)
{
    bk_zk *zk = arg;
    zhandle_t *old = swap_handle(zk, NULL);
    if (old)
        zookeeper_close(old);
    for (;;) {
        pthread_mutex_lock(&zk->mu);
        bool stop = zk->stopping;
        pthread_mutex_unlock(&zk->mu);
        if (stop)
            return NULL;
        swap_handle(zk, zk->servers);
        pthread_mutex_lock(&zk->mu);
        bool ok = zk->zh != NULL;
        pthread_mutex_unlock(&zk->mu);
        if (ok)
            return NULL;
        BK_ERROR("zookeeper: cannot create a new session handle for %s: %s; "
                 "retrying in 1 s", zk->servers, strerror(errno));
        sleep(1);
    }
}

static void start_reinit(bk_zk *zk)
{
    if (zk->reinit_running) {
        pthread_join(zk->reinit, NULL);
        zk->reinit_running = false;
    }
    if (pthread_create(&zk->reinit, NULL, reinit_main, zk) == 0)
        zk->reinit_running = true;
    else
        BK_ERROR("zookeeper: cannot start the session thread; cluster mode is stuck");
}

/* The loop's part of a session event, before the mirror's hook. */
static zk_hooks user_hooks;

static void session_hook(bk_broker *b, enum zk_session s, bool fresh)
{
    bk_zk *zk = b->zk;
    if (s == ZK_EXPIRED) {
        BK_WARN("zookeeper: session 0x%llx expired; making a new one",
                (unsigned long long)zk->session_id);
        start_reinit(zk);
    }
    user_hooks.on_session(b, s, fresh);
}

/* ---- startup -------------------------------------------------------------------------- */

static int sync_create_path(zhandle_t *zh, const char *path)
{
    int rc = zoo_create(zh, path, NULL, -1, &ZOO_OPEN_ACL_UNSAFE, 0, NULL, 0);
    return rc == ZOK || rc == ZNODEEXISTS ? ZOK : rc;
}

/* The chroot's znodes must exist before a handle rooted there can work:
 * made through a short session without the chroot, as Kafka does. */
static int make_chroot(bk_zk *zk, const char *chroot, char *err, size_t errlen)
{
    char hosts[1024];
    snprintf(hosts, sizeof hosts, "%.*s", (int)(chroot - zk->servers), zk->servers);
    swap_handle(zk, hosts);
    zhandle_t *zh = zk->zh;
    if (!zh) {
        snprintf(err, errlen, "zookeeper.connect=%s: cannot use these servers: %s",
                 zk->servers, strerror(errno));
        return -1;
    }
    int rc = ZOK;
    if (wait_connected(zk, zk->timeout_ms) != 0) {
        snprintf(err, errlen, "zookeeper.connect=%s: no ZooKeeper server answered "
                 "within %d ms (zookeeper.connection.timeout.ms)", zk->servers,
                 zk->timeout_ms);
        rc = -1;
    } else {
        char path[1024];
        for (const char *p = chroot + 1; rc == ZOK; p++) {
            if (*p && *p != '/')
                continue;
            snprintf(path, sizeof path, "%.*s", (int)(p - chroot), chroot);
            if ((rc = sync_create_path(zh, path)) != ZOK)
                snprintf(err, errlen, "zookeeper.connect=%s: cannot create the chroot "
                         "%s: %s", zk->servers, path, cl_zk_rc_str(rc));
            if (!*p)
                break;
        }
    }
    zookeeper_close(swap_handle(zk, NULL));
    pthread_mutex_lock(&zk->mu);
    zk_msg *m = zk->head;                     /* that session's events: not ours */
    zk->head = zk->tail = NULL;
    pthread_mutex_unlock(&zk->mu);
    for (zk_msg *next; m; m = next) {
        next = m->next;
        msg_free(m);
    }
    return rc == ZOK ? 0 : -1;
}

/* Kafka's persistent paths, so watches and children listings find them. */
static const char *const base_paths[] = {
    "/brokers", "/brokers/ids", "/brokers/topics", "/config", "/config/topics",
    "/config/changes", "/config/brokers", "/config/users", "/admin", "/admin/delete_topics",
    "/admin/controlled_shutdown",
    "/cluster", "/isr_change_notification", "/log_dir_event_notification",
    /* the authorizer's (daemon/cluster/cluster_acls.c) */
    "/kafka-acl", "/kafka-acl/Topic", "/kafka-acl/Group", "/kafka-acl/Cluster",
    "/kafka-acl/TransactionalId", "/kafka-acl-changes", "/kafka-acl-extended",
    "/kafka-acl-extended/prefixed", "/kafka-acl-extended/prefixed/Topic",
    "/kafka-acl-extended/prefixed/Group", "/kafka-acl-extended/prefixed/Cluster",
    "/kafka-acl-extended/prefixed/TransactionalId", "/kafka-acl-extended-changes",
    "/kafka-acl/Subject", "/kafka-acl-extended/prefixed/Subject",   /* Sluice's own type */
    /* cluster links and mirror topics (daemon/cluster/cluster_links.c) */
    "/sluice", "/sluice/cluster_links", "/sluice/mirror_topics", "/sluice/mirror_caught_up",
    "/sluice/mirror_local_epochs",
};

int cl_zk_start(bk_broker *b, const zk_hooks *hooks, bk_zk **out, char *err, size_t errlen)
{
    *out = NULL;
    bk_zk *zk = calloc(1, sizeof *zk);
    if (!zk) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    zk->b = b;
    user_hooks = *hooks;
    zk->hooks = *hooks;
    zk->hooks.on_session = session_hook;
    snprintf(zk->servers, sizeof zk->servers, "%s", b->cfg->zookeeper_connect);
    zk->timeout_ms = b->cfg->zookeeper_session_timeout_ms;
    pthread_mutex_init(&zk->mu, NULL);
    pthread_mutex_init(&zk->hmu, NULL);
    pthread_cond_init(&zk->cv, NULL);
    zoo_set_debug_level(ZOO_LOG_LEVEL_ERROR);
    zk->ev = event_new(b->base, -1, 0, on_posted, zk);
    if (!zk->ev) {
        snprintf(err, errlen, "zookeeper: cannot create the loop's event: %s", strerror(errno));
        goto fail;
    }
    int ctimeout = b->cfg->zookeeper_connection_timeout_ms;
    const char *chroot = strchr(zk->servers, '/');
    if (chroot && strcmp(chroot, "/")) {
        int saved = zk->timeout_ms;
        zk->timeout_ms = ctimeout;
        int rc = make_chroot(zk, chroot, err, errlen);
        zk->timeout_ms = saved;
        if (rc)
            goto fail;
    }
    swap_handle(zk, zk->servers);
    if (!zk->zh) {
        snprintf(err, errlen, "zookeeper.connect=%s: cannot use these servers: %s",
                 zk->servers, strerror(errno));
        goto fail;
    }
    if (wait_connected(zk, ctimeout) != 0) {
        snprintf(err, errlen, "zookeeper.connect=%s: no ZooKeeper server answered "
                 "within %d ms (zookeeper.connection.timeout.ms)", zk->servers, ctimeout);
        goto fail;
    }
    for (size_t i = 0; i < sizeof base_paths / sizeof *base_paths; i++) {
        int rc = sync_create_path(zk->zh, base_paths[i]);
        if (rc != ZOK) {
            snprintf(err, errlen, "zookeeper.connect=%s: cannot create %s: %s",
                     zk->servers, base_paths[i], cl_zk_rc_str(rc));
            goto fail;
        }
    }
    *out = zk;
    BK_INFO("zookeeper: connected to %s, session 0x%llx", zk->servers,
            (unsigned long long)zoo_client_id(zk->zh)->client_id);
    return 0;
fail:
    cl_zk_stop(zk);
    return -1;
}

static zk_msg *result_msg(const void *data, int rc);
static void done_msg(const void *data, zk_msg *m);
static zk_msg *multi_msg(op_ctx *c, int rc, bool ran);

/* Z1 at the end.  The client's threads are gone: an operation still linked
 * in zk->ops will never complete by itself, so it completes here; then
 * every queued result reaches its caller as ZCLOSING (also one that had
 * succeeded: the loop that would act on it has stopped), so that each
 * frees what it holds.  A callback's new request fails at once (no handle)
 * and is queued again; a few rounds drain those. */
static void drain_closing(bk_zk *zk)
{
    for (op_ctx *c; (c = zk->ops); ) {
        if (c->txn)
            done_msg(c, multi_msg(c, ZCLOSING, false));
        else
            done_msg(c, result_msg(c, ZCLOSING));
    }
    for (int round = 0; round < 8 && zk->head; round++) {
        zk_msg *m = zk->head;
        zk->head = zk->tail = NULL;
        for (zk_msg *next; m; m = next) {
            next = m->next;
            if (m->kind == M_RESULT) {
                zk_result r = { .rc = ZCLOSING, .len = -1, .op_rc = m->r.op_rc,
                                .nops = m->r.nops };
                m->cb(zk->b, &r, m->arg);
            }
            msg_free(m);
        }
    }
    for (zk_msg *m = zk->head, *next; m; m = next) {
        next = m->next;
        msg_free(m);
    }
    zk->head = zk->tail = NULL;
}

void cl_zk_stop(bk_zk *zk)
{
    if (!zk)
        return;
    pthread_mutex_lock(&zk->mu);
    zk->stopping = true;
    pthread_mutex_unlock(&zk->mu);
    if (zk->reinit_running)
        pthread_join(zk->reinit, NULL);
    zhandle_t *zh = swap_handle(zk, NULL);
    if (zh)
        zookeeper_close(zh);                  /* joins the client's threads */
    drain_closing(zk);
    if (zk->ev)
        event_free(zk->ev);
    pthread_mutex_destroy(&zk->mu);
    pthread_mutex_destroy(&zk->hmu);
    pthread_cond_destroy(&zk->cv);
    free(zk);
}

void cl_zk_delete_own_now(bk_zk *zk, const char *path)
{
    if (!zk)
        return;
    pthread_mutex_lock(&zk->hmu);
    zhandle_t *zh = zk->zh;
    struct Stat st;
    if (zh && zoo_state(zh) == ZOO_CONNECTED_STATE &&
        zoo_exists(zh, path, 0, &st) == ZOK &&
        st.ephemeralOwner == zoo_client_id(zh)->client_id)
        zoo_delete(zh, path, st.version);
    pthread_mutex_unlock(&zk->hmu);
}

bool cl_zk_connected(const bk_zk *zk)
{
    return zk && zk->connected;
}

int64_t cl_zk_session_id(const bk_zk *zk)
{
    return zk ? zk->session_id : 0;
}

const char *cl_zk_servers(const bk_zk *zk)
{
    return zk->servers;
}

const char *cl_zk_rc_str(int rc)
{
    static __thread char buf[96];
    snprintf(buf, sizeof buf, "%s (%d)", zerror(rc), rc);
    return buf;
}

/* ---- operations ------------------------------------------------------------------------- */

static op_ctx *ctx_new(bk_zk *zk, zk_cb cb, void *arg)
{
    op_ctx *c = malloc(sizeof *c);
    if (!c)
        abort();                              /* Z1 cannot be kept without it */
    *c = (op_ctx){ .zk = zk, .cb = cb, .arg = arg };
    pthread_mutex_lock(&zk->mu);
    c->next = zk->ops;
    if (zk->ops)
        zk->ops->prev = c;
    zk->ops = c;
    pthread_mutex_unlock(&zk->mu);
    return c;
}

static void ctx_unlink(op_ctx *c)
{
    bk_zk *zk = c->zk;
    pthread_mutex_lock(&zk->mu);
    if (c->prev)
        c->prev->next = c->next;
    else
        zk->ops = c->next;
    if (c->next)
        c->next->prev = c->prev;
    pthread_mutex_unlock(&zk->mu);
}

static zk_msg *result_msg(const void *data, int rc)
{
    op_ctx *c = (op_ctx *)data;
    zk_msg *m = calloc(1, sizeof *m);
    if (!m)
        abort();
    m->kind = M_RESULT;
    m->cb = c->cb;
    m->arg = c->arg;
    m->r.rc = rc;
    m->r.len = -1;
    return m;
}

static void done_msg(const void *data, zk_msg *m)
{
    op_ctx *c = (op_ctx *)data;
    bk_zk *zk = c->zk;
    ctx_unlink(c);
    free(c);
    post(zk, m);
}

/* A multi's result message, each operation's rc read from the client's
 * results (or rc for all of them when the multi never ran). */
static zk_msg *multi_msg(op_ctx *c, int rc, bool ran)
{
    zk_msg *m = result_msg(c, rc);
    zk_txn *t = c->txn;
    for (int i = 0; i < t->n; i++)
        t->op_rc[i] = ran ? t->res[i].err : rc;
    m->txn = t;
    m->r.op_rc = t->op_rc;
    m->r.nops = t->n;
    return m;
}

static void data_done(int rc, const char *value, int len, const struct Stat *st,
                      const void *data)
{
    zk_msg *m = result_msg(data, rc);
    if (rc == ZOK && st)
        m->r.stat = *st;
    if (rc == ZOK && value && len >= 0) {
        if (!(m->data = malloc((size_t)len + 1)))
            abort();
        memcpy(m->data, value, (size_t)len);
        m->data[len] = 0;
        m->r.data = m->data;
        m->r.len = len;
    }
    done_msg(data, m);
}

static void stat_done(int rc, const struct Stat *st, const void *data)
{
    zk_msg *m = result_msg(data, rc);
    if (rc == ZOK && st)
        m->r.stat = *st;
    done_msg(data, m);
}

static void children_done(int rc, const struct String_vector *sv, const void *data)
{
    zk_msg *m = result_msg(data, rc);
    if (rc == ZOK && sv && sv->count > 0) {
        if (!(m->r.children = calloc((size_t)sv->count, sizeof *m->r.children)))
            abort();
        for (int i = 0; i < sv->count; i++)
            if (!(m->r.children[i] = strdup(sv->data[i])))
                abort();
        m->r.nchildren = sv->count;
        qsort(m->r.children, (size_t)sv->count, sizeof *m->r.children, cmp_str);
    }
    done_msg(data, m);
}

static void string_done(int rc, const char *value, const void *data)
{
    (void)value;
    done_msg(data, result_msg(data, rc));
}

static void multi_done(int rc, const void *data)
{
    op_ctx *c = (op_ctx *)data;
    done_msg(c, multi_msg(c, rc, true));
}

/* The call on the current handle, under hmu (Z3); with no handle, or when
 * the client refuses the request, its callback still comes (Z1). */
#define WITH_HANDLE(zk, call, c)                                                \
    do {                                                                        \
        pthread_mutex_lock(&(zk)->hmu);                                         \
        int rc_ = (zk)->zh ? (call) : ZINVALIDSTATE;                            \
        pthread_mutex_unlock(&(zk)->hmu);                                       \
        if (rc_ != ZOK)                                                         \
            done_msg(c, result_msg(c, rc_));                                    \
    } while (0)

void cl_zk_get(bk_zk *zk, const char *path, bool watch, zk_cb cb, void *arg)
{
    op_ctx *c = ctx_new(zk, cb, arg);
    WITH_HANDLE(zk, zoo_aget(zk->zh, path, watch, data_done, c), c);
}

void cl_zk_sync(bk_zk *zk, const char *path, zk_cb cb, void *arg)
{
    op_ctx *c = ctx_new(zk, cb, arg);
    WITH_HANDLE(zk, zoo_async(zk->zh, path, string_done, c), c);
}

void cl_zk_exists(bk_zk *zk, const char *path, bool watch, zk_cb cb, void *arg)
{
    op_ctx *c = ctx_new(zk, cb, arg);
    WITH_HANDLE(zk, zoo_aexists(zk->zh, path, watch, stat_done, c), c);
}

void cl_zk_children(bk_zk *zk, const char *path, bool watch, zk_cb cb, void *arg)
{
    op_ctx *c = ctx_new(zk, cb, arg);
    WITH_HANDLE(zk, zoo_aget_children(zk->zh, path, watch, children_done, c), c);
}

void cl_zk_create(bk_zk *zk, const char *path, const char *data, int len, int flags,
               zk_cb cb, void *arg)
{
    op_ctx *c = ctx_new(zk, cb, arg);
    WITH_HANDLE(zk, zoo_acreate(zk->zh, path, data, len, &ZOO_OPEN_ACL_UNSAFE, flags,
                                string_done, c), c);
}

void cl_zk_set(bk_zk *zk, const char *path, const char *data, int len, int version,
            zk_cb cb, void *arg)
{
    op_ctx *c = ctx_new(zk, cb, arg);
    WITH_HANDLE(zk, zoo_aset(zk->zh, path, data, len, version, stat_done, c), c);
}

/* ---- transactions ------------------------------------------------------------------------ */

zk_txn *cl_zk_txn_new(void)
{
    zk_txn *t = calloc(1, sizeof *t);
    if (!t)
        abort();
    return t;
}

static char *keep(zk_txn *t, const char *s, int len)
{
    if (!s)
        return NULL;
    if (t->nbufs % 32 == 0) {
        char **nb = realloc(t->bufs, (size_t)(t->nbufs + 32) * sizeof *nb);
        if (!nb)
            abort();
        t->bufs = nb;
    }
    size_t n = len < 0 ? strlen(s) : (size_t)len;
    char *c = malloc(n + 1);
    if (!c)
        abort();
    memcpy(c, s, n);
    c[n] = 0;
    return t->bufs[t->nbufs++] = c;
}

static zoo_op_t *next_op(zk_txn *t)
{
    if (t->n == t->cap) {
        int cap = t->cap ? t->cap * 2 : 16;
        zoo_op_t *o = realloc(t->ops, (size_t)cap * sizeof *o);
        zoo_op_result_t *r = o ? realloc(t->res, (size_t)cap * sizeof *r) : NULL;
        if (!o || !r)
            abort();
        t->ops = o;
        t->res = r;
        t->cap = cap;
    }
    return &t->ops[t->n++];
}

void cl_zk_txn_create(zk_txn *t, const char *path, const char *data, int len, int flags)
{
    const char *p = keep(t, path, -1), *d = keep(t, data, len);
    zoo_create_op_init(next_op(t), p, d, d ? len : -1, &ZOO_OPEN_ACL_UNSAFE, flags, NULL, 0);
}

void cl_zk_txn_set(zk_txn *t, const char *path, const char *data, int len, int version)
{
    const char *p = keep(t, path, -1), *d = keep(t, data, len);
    zoo_set_op_init(next_op(t), p, d, d ? len : -1, version, NULL);
}

void cl_zk_txn_delete(zk_txn *t, const char *path, int version)
{
    zoo_delete_op_init(next_op(t), keep(t, path, -1), version);
}

void cl_zk_txn_check(zk_txn *t, const char *path, int version)
{
    zoo_check_op_init(next_op(t), keep(t, path, -1), version);
}

int cl_zk_txn_count(const zk_txn *t)
{
    return t->n;
}

void cl_zk_txn_commit(bk_zk *zk, zk_txn *t, zk_cb cb, void *arg)
{
    if (!(t->op_rc = calloc((size_t)(t->n ? t->n : 1), sizeof *t->op_rc)))
        abort();
    memset(t->res, 0, (size_t)t->cap * sizeof *t->res);
    op_ctx *c = ctx_new(zk, cb, arg);
    c->txn = t;
    pthread_mutex_lock(&zk->hmu);
    int rc = zk->zh ? zoo_amulti(zk->zh, t->n, t->ops, t->res, multi_done, c) : ZINVALIDSTATE;
    pthread_mutex_unlock(&zk->hmu);
    if (rc != ZOK)
        done_msg(c, multi_msg(c, rc, false));
}
