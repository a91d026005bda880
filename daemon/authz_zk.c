/*
 * daemon/authz_zk.c — cluster mode: the ACLs live in ZooKeeper, in Kafka's
 * layout, and every broker mirrors them into its acls table.
 *
 *   /kafka-acl/<Type>/<name>                     LITERAL ACLs of one resource
 *   /kafka-acl-extended/prefixed/<Type>/<name>   PREFIXED ones
 *       {"version":1,"acls":[{"principal":"User:a","permissionType":"Allow",
 *                             "operation":"Read","host":"*"}]}
 *   /kafka-acl-changes/acl_changes_<seq>         "Topic:name" (a LITERAL change)
 *   /kafka-acl-extended-changes/acl_changes_<seq>
 *       {"version":1,"resourceType":"Topic","name":"x","patternType":"Prefixed"}
 * <Type> is Topic, Group, Cluster or TransactionalId; operations and
 * permissions are Kafka's Java names (Read, ClusterAction, Allow).
 *
 * Write (bk_authz_zk_write, from bk_acl_apply): each resource the change
 * touches gets its whole new ACL list in one multi-op with a change
 * notification, as Kafka's AclAuthorizer writes them.  Read: a child watch
 * on both change folders; any notification (and every new or resumed
 * session) starts a resync that lists and reads every ACL znode — all
 * asynchronous, never a round trip on the loop — and replaces the acls
 * table with what it found, then reloads the authorizer.
 *
 * Invariants:
 *   K1. ZooKeeper is the truth: the table is only ever replaced by a whole
 *       resync's result; a write applied locally first (so the client that
 *       made it sees it at once) is confirmed or undone by the resync its
 *       own notification starts.
 *   K2. A resync whose generation is no longer current is dropped: its
 *       callbacks free their context and change nothing.
 *   K3. A write builds each resource's new list from the authorizer's
 *       current set; a concurrent writer elsewhere can make that stale
 *       (ZNODEEXISTS / ZNONODE): the multi-op then fails whole, is logged,
 *       and the resync restores ZooKeeper's view.
 */
#include "daemon/authz.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/request.h"
#include "daemon/zk.h"
#include "daemon/zk_json.h"

#define ACL_ROOT "/kafka-acl"
#define ACL_PREFIXED_ROOT "/kafka-acl-extended/prefixed"
#define ACL_CHANGES "/kafka-acl-changes"
#define ACL_EXT_CHANGES "/kafka-acl-extended-changes"

static const char *const zk_types[] = { "Topic", "Group", "Cluster", "TransactionalId" };
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

static void sync_done(bk_broker *b)
{
    if (--sync_.pending > 0)
        return;
    char err[MD_ERRLEN];
    if (sync_.failed)
        BK_WARN("zookeeper: the ACLs could not all be read; keeping the ones known");
    else if (md_acl_replace(b->db, sync_.rows, sync_.n, err, sizeof err) != 0)
        BK_ERROR("storing the ACLs read from ZooKeeper failed: %s", err);
    else
        bk_authz_reload(b);
    md_acl_free(sync_.rows, sync_.n);
    sync_.rows = NULL;
    sync_.n = sync_.cap = 0;
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
    } else if (r->len > 0 && zj_acls_parse(r->data, (size_t)r->len, &acls, &n, err,
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
        char path[1024];
        snprintf(path, sizeof path, "%s/%s/%s", c->prefixed ? ACL_PREFIXED_ROOT : ACL_ROOT,
                 zk_types[c->type], r->children[i]);
        sync_ctx *g = ctx_new(c->type, c->prefixed, r->children[i]);
        if (!g) {
            sync_.failed = true;
            continue;
        }
        sync_.pending++;
        zk_get(b->zk, path, false, on_get, g);
    }
    free(c);
    sync_done(b);
}

static void on_changes(bk_broker *b, const zk_result *r, void *arg)
{
    (void)b; (void)r; (void)arg;          /* the watch is what was wanted */
}

void bk_authz_zk_resync(bk_broker *b)
{
    if (!b->zk)
        return;
    sync_.gen++;                                  /* K2: drops the one running */
    md_acl_free(sync_.rows, sync_.n);
    sync_.rows = NULL;
    sync_.n = sync_.cap = 0;
    sync_.failed = false;
    sync_.pending = 1;                            /* this function's own share */
    zk_children(b->zk, ACL_CHANGES, true, on_changes, NULL);
    zk_children(b->zk, ACL_EXT_CHANGES, true, on_changes, NULL);
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
            zk_children(b->zk, path, false, on_children, c);
        }
    sync_done(b);
}

bool bk_authz_zk_on_watch(bk_broker *b, int type, const char *path)
{
    if (strcmp(path, ACL_CHANGES) && strcmp(path, ACL_EXT_CHANGES))
        return false;
    if (type == ZOO_CHILD_EVENT)
        bk_authz_zk_resync(b);
    return true;
}

/* ---- writing ------------------------------------------------------------------------ */
static bool same_resource(const md_acl *a, const md_acl *b)
{
    return !strcmp(a->resource_type, b->resource_type) &&
           !strcmp(a->pattern_type, b->pattern_type) &&
           !strcmp(a->resource_name, b->resource_name);
}

static bool same_acl(const md_acl *a, const md_acl *b)
{
    return same_resource(a, b) && !strcmp(a->principal, b->principal) &&
           !strcmp(a->host, b->host) && !strcmp(a->operation, b->operation) &&
           !strcmp(a->permission, b->permission);
}

static void on_written(bk_broker *b, const zk_result *r, void *arg)
{
    (void)arg;
    if (r->rc == ZOK)
        return;
    BK_WARN("zookeeper: writing ACLs failed (%s); resyncing them", zk_rc_str(r->rc));
    bk_authz_zk_resync(b);                        /* K3 */
}

/* One resource's new znode and its notification into t. */
static int write_resource(const md_acl *key, const md_acl *list, size_t n, bool existed,
                          zk_txn *t)
{
    char type[32], path[1024];
    int res = bk_res_parse(key->resource_type);
    if (res != BK_RES_TOPIC && res != BK_RES_GROUP && res != BK_RES_CLUSTER &&
        res != BK_RES_TRANSACTIONAL_ID)
        return -1;
    enum_to_java(key->resource_type, type, sizeof type);
    bool prefixed = !strcmp(key->pattern_type, "PREFIXED");
    snprintf(path, sizeof path, "%s/%s/%s", prefixed ? ACL_PREFIXED_ROOT : ACL_ROOT, type,
             key->resource_name);
    kp_buf j;
    kp_buf_init(&j);
    md_acl *java = calloc(n ? n : 1, sizeof *java);
    char (*names)[2][32] = calloc(n ? n : 1, sizeof *names);
    int rc = java && names ? 0 : -1;
    for (size_t i = 0; !rc && i < n; i++) {
        enum_to_java(list[i].operation, names[i][0], sizeof names[i][0]);
        enum_to_java(list[i].permission, names[i][1], sizeof names[i][1]);
        java[i] = (md_acl){ .principal = list[i].principal, .host = list[i].host,
                            .operation = names[i][0], .permission = names[i][1] };
    }
    if (!rc && n)
        rc = zj_acls_format(java, n, &j);
    if (!rc && !n && existed)
        zk_txn_delete(t, path, -1);
    else if (!rc && n && existed)
        zk_txn_set(t, path, (const char *)j.data, (int)j.len, -1);
    else if (!rc && n)
        zk_txn_create(t, path, (const char *)j.data, (int)j.len, 0);
    if (!rc) {
        kp_buf_reset(&j);
        if (prefixed) {
            rc = zj_acl_change_format(type, key->resource_name, &j);
            zk_txn_create(t, ACL_EXT_CHANGES "/acl_changes_", (const char *)j.data,
                          (int)j.len, ZOO_SEQUENCE);
        } else {
            char note[1024];
            int len = snprintf(note, sizeof note, "%s:%s", type, key->resource_name);
            zk_txn_create(t, ACL_CHANGES "/acl_changes_", note, len, ZOO_SEQUENCE);
        }
    }
    kp_buf_free(&j);
    free(java);
    free(names);
    return rc;
}

int bk_authz_zk_write(bk_broker *b, const bk_authz *az, const md_acl *del, size_t ndel,
                      const md_acl *add, size_t nadd, char *err, size_t errlen)
{
    /* The current set as rows, to start each touched resource's list from. */
    bk_acl_filter all = { .res = BK_RES_ANY, .pat = BK_PAT_ANY, .op = BK_OP_ANY,
                          .perm = BK_PERM_ANY, .name = KP_STR_NULL, .principal = KP_STR_NULL,
                          .host = KP_STR_NULL };
    const bk_acl **cur;
    size_t ncur;
    if (bk_authz_select(az, &all, &cur, &ncur) != 0)
        return KP_UNKNOWN_SERVER_ERROR;
    size_t ntouch = ndel + nadd;
    md_acl *rows = calloc(ncur + nadd + 1, sizeof *rows);
    zk_txn *t = zk_txn_new();
    int rc = rows && t ? KP_NONE : KP_UNKNOWN_SERVER_ERROR;
    for (size_t k = 0; rc == KP_NONE && k < ntouch; k++) {
        const md_acl *key = k < ndel ? &del[k] : &add[k - ndel];
        bool dup = false;
        for (size_t j = 0; j < k; j++)
            dup |= same_resource(j < ndel ? &del[j] : &add[j - ndel], key);
        if (dup)
            continue;
        size_t n = 0;
        bool existed = false;
        for (size_t i = 0; i < ncur; i++) {
            md_acl row;
            bk_acl_row(cur[i], &row);
            if (!same_resource(&row, key))
                continue;
            existed = true;
            bool gone = false;
            for (size_t d = 0; d < ndel; d++)
                gone |= same_acl(&row, &del[d]);
            if (!gone)
                rows[n++] = row;
        }
        for (size_t a = 0; a < nadd; a++) {
            bool have = !same_resource(&add[a], key);
            for (size_t i = 0; !have && i < n; i++)
                have = same_acl(&rows[i], &add[a]);
            if (!have)
                rows[n++] = add[a];
        }
        if (write_resource(key, rows, n, existed, t) != 0) {
            snprintf(err, errlen, "cannot write the ACLs of %s %s to ZooKeeper",
                     key->resource_type, key->resource_name);
            rc = KP_UNKNOWN_SERVER_ERROR;
        }
    }
    free(cur);
    free(rows);
    if (rc != KP_NONE || zk_txn_count(t) == 0) {
        zk_txn_free(t);
        return rc;
    }
    zk_txn_commit(b->zk, t, on_written, NULL);
    return KP_NONE;
}
