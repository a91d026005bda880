/*
 * daemon/cluster/cluster_acls.c — cluster mode: the ACLs live in ZooKeeper, in Kafka's
 * layout, and every broker mirrors them into its acls table.
 *
 *   /kafka-acl/<Type>/<name>                     LITERAL ACLs of one resource
 *   /kafka-acl-extended/prefixed/<Type>/<name>   PREFIXED ones
 *       {"version":1,"acls":[{"principal":"User:a","permissionType":"Allow",
 *                             "operation":"Read","host":"*"}]}
 *   /kafka-acl-changes/acl_changes_<seq>         "Topic:name" (a LITERAL change)
 *   /kafka-acl-extended-changes/acl_changes_<seq>
 *       {"version":1,"resourceType":"Topic","name":"x","patternType":"Prefixed"}
 * <Type> is Topic, Group, Cluster, TransactionalId or Subject (the schema
 * registry's, Sluice's own: sec_authz.h); operations and
 * permissions are Kafka's Java names (Read, ClusterAction, Allow).
 *
 * Write (cl_authz_zk_write: cl_store_zk's acl_change, from sec_acl_apply),
 * for each resource the change touches, as Kafka's AclAuthorizer does:
 *
 *   get the znode (its list and version; none: empty, version -1)
 *     ──► the list minus the deletions plus the additions; unchanged: done
 *     ──► multi: set at that version (create when none, delete when the
 *         list is empty) + a change notification
 *           ZOK ──► done
 *           ZBADVERSION / ZNODEEXISTS / ZNONODE ──► get again (up to 10)
 *           other ──► done with the error
 *   every resource done ──► a resync ──► its end answers (op->done)
 *
 * Read: a child watch on both change folders; any notification (and every
 * new or resumed session) starts a resync that lists and reads every ACL
 * znode — all asynchronous, never a round trip on the loop — and replaces
 * the acls table with what it found, then reloads the authorizer.
 *
 * Invariants:
 *   K1. ZooKeeper is the truth: the table is only ever replaced by a whole
 *       resync's result, never by a write (a write that failed leaves
 *       nothing here).
 *   K2. A resync whose generation is no longer current is dropped: its
 *       callbacks free their context and change nothing.
 *   K3. A write builds each resource's new list from the znode as read, and
 *       writes it at the version read: a concurrent writer (another broker)
 *       makes it fail whole, and it is read and made again, so both
 *       writers' ACLs survive.
 *   K4. A write is answered only by the end of a resync started after its
 *       last znode write was confirmed: once answered, DescribeAcls and the
 *       authorizer on this broker show it.
 *   K5. This broker's writes go one at a time (a FIFO; Kafka's write
 *       lock): only other brokers race a write, so its retries suffice.
 *   K6. Shutdown (cl_authz_zk_stop, before cl_zk_stop): every write not yet
 *       answered is answered REQUEST_TIMED_OUT now and freed, the head's
 *       once its in-flight calls come back (ZCLOSING, cluster_zk.c Z1); nothing
 *       new goes to ZooKeeper after it.
 */
#include "daemon/security/sec_authz.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/cluster/cluster.h"
#include "daemon/request.h"
#include "daemon/cluster/cluster_zk.h"
#include "daemon/cluster/cluster_zk_json.h"

#define ACL_ROOT "/kafka-acl"
#define ACL_PREFIXED_ROOT "/kafka-acl-extended/prefixed"
#define ACL_CHANGES "/kafka-acl-changes"
#define ACL_EXT_CHANGES "/kafka-acl-extended-changes"

static const char *const zk_types[] = { "Topic", "Group", "Cluster", "TransactionalId",
                                        "Subject" };   /* the last: Sluice's own (sec_authz.h) */
#define NTYPES (sizeof zk_types / sizeof *zk_types)

/* "ClusterAction" → "CLUSTER_ACTION" (out[cap]); and back. */
static void java_to_enum(const char *s, char *out, size_t cap)
{
    size_t n = 0;
    for (size_t i = 0; s[i] && n + 2 < cap; i++) {
        if (i && isupper((unsigned char)s[i]))
            out[n++] = '_';
        out[n++] = (char)toupper((unsigned char)s[i]);
    }
    out[n] = 0;
}

static void enum_to_java(const char *s, char *out, size_t cap)
{
    size_t n = 0;
    bool up = true;
    for (size_t i = 0; s[i] && n + 1 < cap; i++) {
        if (s[i] == '_') {
            up = true;
            continue;
        }
        out[n++] = up ? s[i] : (char)tolower((unsigned char)s[i]);
        up = false;
    }
    out[n] = 0;
}

static bool stopping;                /* K6 */

/* ---- reading: the resync ---------------------------------------------------------- */
static struct {
    uint64_t gen;                    /* K2 */
    int pending;                     /* zk calls of the current resync in flight */
    bool failed;
    md_acl *rows;
    size_t n, cap;
} sync_;

typedef struct sync_ctx {
    uint64_t gen;
    int type;                        /* index into zk_types */
    bool prefixed;
    char name[];                     /* the resource (on_get) */
} sync_ctx;

static void waiters_answer(uint64_t gen, bool failed);

static void sync_done(bk_broker *b)
{
    if (--sync_.pending > 0)
        return;
    bool failed = sync_.failed;
    char err[MD_ERRLEN];
    if (sync_.failed)
        BK_WARN("zookeeper: the ACLs could not all be read; keeping the ones known");
    else if (md_acl_replace(b->db, sync_.rows, sync_.n, err, sizeof err) != 0) {
        BK_ERROR("storing the ACLs read from ZooKeeper failed: %s", err);
        failed = true;
    } else if (sec_authz_reload(b) != 0) {
        failed = true;
    }
    md_acl_free(sync_.rows, sync_.n);
    sync_.rows = NULL;
    sync_.n = sync_.cap = 0;
    waiters_answer(sync_.gen, failed);
}

static bool sync_current(const sync_ctx *c)
{
    return c->gen == sync_.gen;
}

static void on_get(bk_broker *b, const zk_result *r, void *arg)
{
    sync_ctx *c = arg;
    if (!sync_current(c)) {
        free(c);
        return;
    }
    md_acl *acls = NULL;
    size_t n = 0;
    char err[256];
    if (r->rc == ZNONODE) {
        /* deleted since it was listed: no ACLs */
    } else if (r->rc != ZOK) {
        sync_.failed = true;
    } else if (r->len > 0 && cl_zj_acls_parse(r->data, (size_t)r->len, &acls, &n, err,
                                           sizeof err) != 0) {
        BK_WARN("zookeeper: ACLs of %s %s are not Kafka's JSON (%s); skipped",
                zk_types[c->type], c->name, err);
    }
    if (sync_.n + n > sync_.cap) {
        size_t cap = (sync_.n + n) * 2;
        md_acl *g = realloc(sync_.rows, cap * sizeof *g);
        if (!g) {
            sync_.failed = true;
            n = 0;
        } else {
            sync_.rows = g;
            sync_.cap = cap;
        }
    }
    for (size_t i = 0; i < n; i++) {
        char res[32], op[32], perm[16];
        java_to_enum(zk_types[c->type], res, sizeof res);
        java_to_enum(acls[i].operation, op, sizeof op);
        java_to_enum(acls[i].permission, perm, sizeof perm);
        md_acl *o = &sync_.rows[sync_.n++];
        *o = (md_acl){
            .resource_type = strdup(res), .resource_name = strdup(c->name),
            .pattern_type = strdup(c->prefixed ? "PREFIXED" : "LITERAL"),
            .principal = acls[i].principal, .host = acls[i].host,
            .operation = strdup(op), .permission = strdup(perm),
        };
        acls[i].principal = acls[i].host = NULL;       /* moved */
        if (!o->resource_type || !o->resource_name || !o->pattern_type || !o->operation ||
            !o->permission)
            sync_.failed = true;
    }
    md_acl_free(acls, n);
    free(c);
    sync_done(b);
}

/* /kafka-acl[-extended]/<Type>/<name>, malloc'd (NULL: no memory): a
 * resource name has no length limit (a group's may be thousands of bytes),
 * so no fixed buffer holds the path. */
static char *acl_path(bool prefixed, const char *type, const char *name)
{
    const char *root = prefixed ? ACL_PREFIXED_ROOT : ACL_ROOT;
    size_t n = strlen(root) + 1 + strlen(type) + 1 + strlen(name) + 1;
    char *p = malloc(n);
    if (p)
        snprintf(p, n, "%s/%s/%s", root, type, name);
    return p;
}

static sync_ctx *ctx_new(int type, bool prefixed, const char *name)
{
    sync_ctx *c = malloc(sizeof *c + strlen(name) + 1);
    if (c) {
        *c = (sync_ctx){ .gen = sync_.gen, .type = type, .prefixed = prefixed };
        strcpy(c->name, name);
    }
    return c;
}

static void on_children(bk_broker *b, const zk_result *r, void *arg)
{
    sync_ctx *c = arg;
    if (!sync_current(c)) {
        free(c);
        return;
    }
    if (r->rc != ZOK && r->rc != ZNONODE)
        sync_.failed = true;
    for (int i = 0; r->rc == ZOK && i < r->nchildren; i++) {
        char *path = acl_path(c->prefixed, zk_types[c->type], r->children[i]);
        sync_ctx *g = path ? ctx_new(c->type, c->prefixed, r->children[i]) : NULL;
        if (!g) {
            free(path);
            sync_.failed = true;
            continue;
        }
        sync_.pending++;
        cl_zk_get(b->zk, path, false, on_get, g);
        free(path);
    }
    free(c);
    sync_done(b);
}

/* The watch is what was wanted; and old notices go (cluster_notices.c). */
static void on_changes(bk_broker *b, const zk_result *r, void *arg)
{
    if (r->rc == ZOK && r->nchildren > 0)
        cl_notices_purge(b, arg);
}

void cl_authz_zk_resync(bk_broker *b)
{
    if (!b->zk || stopping)
        return;
    sync_.gen++;                                  /* K2: drops the one running */
    md_acl_free(sync_.rows, sync_.n);
    sync_.rows = NULL;
    sync_.n = sync_.cap = 0;
    sync_.failed = false;
    sync_.pending = 1;                            /* this function's own share */
    cl_zk_children(b->zk, ACL_CHANGES, true, on_changes, (void *)ACL_CHANGES);
    cl_zk_children(b->zk, ACL_EXT_CHANGES, true, on_changes, (void *)ACL_EXT_CHANGES);
    for (int p = 0; p < 2; p++)
        for (size_t t = 0; t < NTYPES; t++) {
            char path[128];
            snprintf(path, sizeof path, "%s/%s", p ? ACL_PREFIXED_ROOT : ACL_ROOT, zk_types[t]);
            sync_ctx *c = ctx_new((int)t, p, "");
            if (!c) {
                sync_.failed = true;
                continue;
            }
            sync_.pending++;
            cl_zk_children(b->zk, path, false, on_children, c);
        }
    sync_done(b);
}

bool cl_authz_zk_on_watch(bk_broker *b, int type, const char *path)
{
    if (strcmp(path, ACL_CHANGES) && strcmp(path, ACL_EXT_CHANGES))
        return false;
    if (type == ZOO_CHILD_EVENT)
        cl_authz_zk_resync(b);
    return true;
}

/* ---- writing ------------------------------------------------------------------------ */
/* One sec_acl_apply: its rows (copies, operations and permissions in Java
 * names), the resources still being written, the first failure. */
typedef struct aw_job {
    bk_topic_op *op;
    md_acl *rows;                    /* del rows first, then add rows */
    size_t ndel, n;
    int left;
    int rc;
    char err[256];
    uint64_t need_gen;               /* answered by a resync of this generation on */
    struct aw_res **res;             /* its resources, started by job_start */
    int nres;
    struct aw_job *next;             /* the queue, then the read-back waiters */
} aw_job;

/* One resource of a job: key is its first row. */
typedef struct aw_res {
    aw_job *job;
    const md_acl *key;
    int tries;
    char path[];
} aw_res;

#define AW_MAX_TRIES 10              /* Kafka's maxUpdateRetries */

static aw_job *waiters;              /* K4 */
static aw_job *queue, **queue_tail = &queue;   /* K5: the head is writing */

static void job_answer(aw_job *j, int rc, const char *err)
{
    if (j->op)
        j->op->done(j->op, rc, err);
    md_acl_free(j->rows, j->n);
    for (int i = 0; i < j->nres; i++)             /* never started (job_start: 0) */
        free(j->res[i]);
    free(j->res);
    free(j);
}

/* From sync_done: a resync of generation gen read ZooKeeper whole. */
static void waiters_answer(uint64_t gen, bool failed)
{
    aw_job **pp = &waiters;
    while (*pp) {
        aw_job *j = *pp;
        if (j->need_gen > gen) {
            pp = &j->next;
            continue;
        }
        *pp = j->next;
        if (j->rc == KP_NONE && failed)
            job_answer(j, KP_UNKNOWN_SERVER_ERROR, "The ACLs were written to ZooKeeper "
                       "but could not be read back; this broker applies them at its next "
                       "resync.");
        else
            job_answer(j, j->rc, j->err);
    }
}

static bool same_resource(const md_acl *a, const md_acl *b)
{
    return !strcmp(a->resource_type, b->resource_type) &&
           !strcmp(a->pattern_type, b->pattern_type) &&
           !strcmp(a->resource_name, b->resource_name);
}

/* The four fields of one entry of a resource's JSON. */
static bool same_entry(const md_acl *a, const md_acl *b)
{
    return !strcmp(a->principal, b->principal) && !strcmp(a->host, b->host) &&
           !strcmp(a->operation, b->operation) && !strcmp(a->permission, b->permission);
}

static void res_read(bk_broker *b, aw_res *x);

static void job_start(bk_broker *b, aw_job *j)
{
    j->left = j->nres + 1;                       /* + this function's own share */
    for (int i = 0; i < j->nres; i++)
        res_read(b, j->res[i]);
    j->nres = 0;                                 /* each frees its own */
}

static void job_done(bk_broker *b, aw_job *j, int rc, const char *err);

static void job_next(bk_broker *b)
{
    aw_job *j = queue;
    if (!j)
        return;
    job_start(b, j);
    job_done(b, j, KP_NONE, NULL);
}

static void job_done(bk_broker *b, aw_job *j, int rc, const char *err)
{
    if (rc != KP_NONE && j->rc == KP_NONE) {
        j->rc = rc;
        snprintf(j->err, sizeof j->err, "%.255s", err);
    }
    if (--j->left > 0)
        return;
    queue = j->next;                             /* K5: j is the head */
    if (!queue)
        queue_tail = &queue;
    if (stopping) {                              /* K6: answered already */
        job_answer(j, j->rc, j->err);
        return;
    }
    /* K4: answered once a resync started after the last write read it back. */
    cl_authz_zk_resync(b);
    j->need_gen = sync_.gen;
    j->next = waiters;
    waiters = j;
    job_next(b);
}

static void res_done(bk_broker *b, aw_res *x, int rc, const char *err)
{
    aw_job *j = x->job;
    free(x);
    job_done(b, j, rc, err);
}

static void on_res_written(bk_broker *b, const zk_result *r, void *arg)
{
    aw_res *x = arg;
    char err[256];
    if (r->rc == ZOK) {
        res_done(b, x, KP_NONE, NULL);
    } else if ((r->rc == ZBADVERSION || r->rc == ZNODEEXISTS || r->rc == ZNONODE) &&
               ++x->tries < AW_MAX_TRIES) {
        res_read(b, x);                          /* K3: another writer won; again */
    } else {
        int rc = cl_zk_error(b, r->rc, "cannot write the ACLs", err, sizeof err);
        BK_WARN("zookeeper: %s (%s)", err, x->path);
        res_done(b, x, rc, err);
    }
}

/* The resource's list as ZooKeeper has it (version), with the job's
 * deletions and additions made: written back at that version with its
 * change notification, in one multi-op (Kafka's AclAuthorizer). */
static void on_res_read(bk_broker *b, const zk_result *r, void *arg)
{
    aw_res *x = arg;
    aw_job *j = x->job;
    char err[256];
    md_acl *cur = NULL;
    size_t ncur = 0;
    if (r->rc != ZOK && r->rc != ZNONODE) {
        int rc = cl_zk_error(b, r->rc, "cannot read the ACLs", err, sizeof err);
        res_done(b, x, rc, err);
        return;
    }
    if (r->rc == ZOK && r->len > 0 &&
        cl_zj_acls_parse(r->data, (size_t)r->len, &cur, &ncur, err, sizeof err) != 0) {
        char msg[400];
        snprintf(msg, sizeof msg, "%s is not Kafka's ACL JSON (%s)", x->path, err);
        res_done(b, x, KP_UNKNOWN_SERVER_ERROR, msg);
        return;
    }
    const md_acl **list = calloc(ncur + j->n + 1, sizeof *list);
    zk_txn *t = cl_zk_txn_new();
    if (!list || !t) {
        free(list);
        cl_zk_txn_free(t);
        md_acl_free(cur, ncur);
        res_done(b, x, KP_UNKNOWN_SERVER_ERROR, "out of memory");
        return;
    }
    size_t n = 0;
    bool changed = false;
    for (size_t i = 0; i < ncur; i++) {
        bool gone = false;
        for (size_t d = 0; d < j->ndel; d++)
            gone |= same_resource(&j->rows[d], x->key) && same_entry(&cur[i], &j->rows[d]);
        if (!gone)
            list[n++] = &cur[i];
        changed |= gone;
    }
    for (size_t a = j->ndel; a < j->n; a++) {
        bool have = !same_resource(&j->rows[a], x->key);
        for (size_t i = 0; !have && i < n; i++)
            have = same_entry(list[i], &j->rows[a]);
        if (!have)
            list[n++] = &j->rows[a];
        changed |= !have;
    }
    int version = r->rc == ZOK ? r->stat.version : -1;
    kp_buf js;
    kp_buf_init(&js);
    md_acl *flat = calloc(n ? n : 1, sizeof *flat);
    for (size_t i = 0; flat && i < n; i++)
        flat[i] = *list[i];
    int rc = flat && (!n || cl_zj_acls_format(flat, n, &js) == 0) ? 0 : -1;
    if (!rc && !n && version >= 0)
        cl_zk_txn_delete(t, x->path, version);
    else if (!rc && n && version >= 0)
        cl_zk_txn_set(t, x->path, (const char *)js.data, (int)js.len, version);
    else if (!rc && n)
        cl_zk_txn_create(t, x->path, (const char *)js.data, (int)js.len, 0);
    if (!rc && cl_zk_txn_count(t)) {
        char type[32];
        enum_to_java(x->key->resource_type, type, sizeof type);
        kp_buf_reset(&js);
        if (!strcmp(x->key->pattern_type, "PREFIXED")) {
            rc = cl_zj_acl_change_format(type, x->key->resource_name, &js);
            cl_zk_txn_create(t, ACL_EXT_CHANGES "/acl_changes_", (const char *)js.data,
                          (int)js.len, ZOO_SEQUENCE);
        } else {
            kp_wr_raw(&js, type, strlen(type));        /* "<Type>:<name>", any length */
            kp_wr_raw(&js, ":", 1);
            kp_wr_raw(&js, x->key->resource_name, strlen(x->key->resource_name));
            rc = js.err ? -1 : 0;
            cl_zk_txn_create(t, ACL_CHANGES "/acl_changes_", (const char *)js.data,
                          (int)js.len, ZOO_SEQUENCE);
        }
    }
    kp_buf_free(&js);
    free(flat);
    free(list);
    md_acl_free(cur, ncur);
    if (rc) {
        cl_zk_txn_free(t);
        res_done(b, x, KP_UNKNOWN_SERVER_ERROR, "cannot format the ACLs for ZooKeeper");
    } else if (!changed || !cl_zk_txn_count(t)) {
        cl_zk_txn_free(t);                          /* nothing to change: no notification */
        res_done(b, x, KP_NONE, NULL);
    } else {
        cl_zk_txn_commit(b->zk, t, on_res_written, x);
    }
}

static void res_read(bk_broker *b, aw_res *x)
{
    cl_zk_get(b->zk, x->path, false, on_res_read, x);
}

/* row with its operation and permission in Java names, all copied. */
static int java_row(const md_acl *row, md_acl *o)
{
    char op[32], perm[16];
    enum_to_java(row->operation, op, sizeof op);
    enum_to_java(row->permission, perm, sizeof perm);
    *o = (md_acl){ .resource_type = strdup(row->resource_type),
                   .resource_name = strdup(row->resource_name),
                   .pattern_type = strdup(row->pattern_type),
                   .principal = strdup(row->principal), .host = strdup(row->host),
                   .operation = strdup(op), .permission = strdup(perm) };
    return o->resource_type && o->resource_name && o->pattern_type && o->principal &&
           o->host && o->operation && o->permission ? 0 : -1;
}

int cl_authz_zk_write(bk_broker *b, const md_acl *del, size_t ndel, const md_acl *add,
                      size_t nadd, bk_topic_op *op, char *err, size_t errlen)
{
    if (!cl_zk_connected(b->zk))
        return cl_zk_error(b, ZCONNECTIONLOSS, "cannot change the ACLs", err, errlen);
    size_t n = ndel + nadd;
    for (size_t k = 0; k < n; k++) {
        int res = sec_res_parse(k < ndel ? del[k].resource_type : add[k - ndel].resource_type);
        if (res != BK_RES_TOPIC && res != BK_RES_GROUP && res != BK_RES_CLUSTER &&
            res != BK_RES_TRANSACTIONAL_ID && res != BK_RES_SUBJECT) {
            snprintf(err, errlen, "ACLs on %s resources cannot be stored in ZooKeeper",
                     sec_res_name(res) ? sec_res_name(res) : "unknown");
            return KP_INVALID_REQUEST;
        }
    }
    aw_job *j = calloc(1, sizeof *j);
    if (!j || !(j->rows = calloc(n ? n : 1, sizeof *j->rows))) {
        free(j);
        snprintf(err, errlen, "out of memory");
        return KP_UNKNOWN_SERVER_ERROR;
    }
    j->op = op;
    j->ndel = ndel;
    int rc = 0;
    for (size_t k = 0; k < n; k++, j->n++)
        rc |= java_row(k < ndel ? &del[k] : &add[k - ndel], &j->rows[k]);
    if (rc) {
        md_acl_free(j->rows, j->n);
        free(j);
        snprintf(err, errlen, "out of memory");
        return KP_UNKNOWN_SERVER_ERROR;
    }
    j->res = calloc(n ? n : 1, sizeof *j->res);
    for (size_t k = 0; j->res && k < n; k++) {
        const md_acl *key = &j->rows[k];
        bool dup = false;
        for (size_t i = 0; i < k; i++)
            dup |= same_resource(&j->rows[i], key);
        if (dup)
            continue;
        char type[32];
        enum_to_java(key->resource_type, type, sizeof type);
        char *path = acl_path(!strcmp(key->pattern_type, "PREFIXED"), type,
                              key->resource_name);
        size_t len = path ? strlen(path) : 0;
        aw_res *x = path ? malloc(sizeof *x + len + 1) : NULL;
        if (!x) {
            free(path);
            j->rc = KP_UNKNOWN_SERVER_ERROR;
            snprintf(j->err, sizeof j->err, "out of memory");
            continue;
        }
        *x = (aw_res){ .job = j, .key = key };
        memcpy(x->path, path, len + 1);
        free(path);
        j->res[j->nres++] = x;
    }
    if (!j->res) {
        j->rc = KP_UNKNOWN_SERVER_ERROR;
        snprintf(j->err, sizeof j->err, "out of memory");
    }
    if (op)
        op->pending = true;
    bool idle = !queue;
    *queue_tail = j;
    queue_tail = &j->next;
    if (idle)
        job_next(b);
    return KP_NONE;
}

void cl_authz_zk_stop(bk_broker *b)
{
    (void)b;
    stopping = true;
    static const char why[] = "The broker shut down before the ACL change was confirmed.";
    for (aw_job *j = waiters, *next; j; j = next) {       /* written, not read back */
        next = j->next;
        job_answer(j, KP_REQUEST_TIMED_OUT, why);
    }
    waiters = NULL;
    aw_job *head = queue;
    for (aw_job *j = head ? head->next : NULL, *next; j; j = next) {   /* never started */
        next = j->next;
        job_answer(j, KP_REQUEST_TIMED_OUT, why);
    }
    if (head) {                  /* its calls in flight free it (job_done, K6) */
        head->next = NULL;
        queue_tail = &head->next;
        if (head->op)
            head->op->done(head->op, KP_REQUEST_TIMED_OUT, why);
        head->op = NULL;
    }
}
