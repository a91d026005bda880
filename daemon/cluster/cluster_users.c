/*
 * daemon/cluster/cluster_users.c — SCRAM credentials shared through ZooKeeper in cluster
 * mode, in Kafka's layout:
 *
 *   /config/users/<name>   {"version":1,"config":{"SCRAM-SHA-256":
 *                           "salt=<b64>,stored_key=<b64>,server_key=<b64>,iterations=4096"}}
 *   /config/changes/config_change_<seq>   {"version":2,"entity_path":"users/<name>"}
 * <name> sanitized as Kafka's Sanitizer does (cl_zj_sanitize: "al,ice=x y" is
 * al%2Cice%3Dx%20y); a child whose name does not desanitize is skipped.
 *
 * Write half (cl_sasl_zk_publish): the broker where an operator changed a
 * user (SQL, AlterUserScramCredentials) has stored it in its own SQLite
 * already, so it serves the new credential at once; it then writes the
 * user's whole credential set from there to /config/users/<name> and
 * leaves Kafka's change notification.  Apply half (the watches): every
 * broker keeps a children watch on /config/users and a data watch on each
 * user's znode, and on a change replaces that user's rows in its SQLite
 * with what the znode says.  Sluice brokers follow the znodes themselves;
 * the notification is for Kafka's tools and brokers; old ones are purged
 * after each write (daemon/cluster/cluster_notices.c), as Kafka's brokers do.
 *
 * Invariants:
 *   Z1. Never a blocking call: every ZooKeeper operation is asynchronous
 *       (daemon/cluster/cluster_zk.h) and its answer is handled on the loop.
 *   Z2. A znode's content is the whole truth about its user: mechanisms
 *       it does not list are deleted locally.  A session (re)start reads
 *       every user again (cl_sasl_zk_resync) and drops local users that
 *       ZooKeeper no longer has, since watches may have been missed.
 *   Z3. Applying is idempotent: a broker that reads back its own write
 *       stores the same rows again.
 */
#include "daemon/security/sec_sasl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/cluster/cluster.h"
#include "daemon/view/view.h"
#include "protocol/kp_scram.h"
#include "daemon/cluster/cluster_zk.h"
#include "daemon/cluster/cluster_zk_json.h"

#define USERS "/config/users"

static const char *const mechs[] = { "SCRAM-SHA-256", "SCRAM-SHA-512" };

/* "salt=..,stored_key=..,server_key=..,iterations=N" → c.  0 or -1. */
static int cred_parse(const char *mech, const char *v, md_scram_cred *c)
{
    memset(c, 0, sizeof *c);
    snprintf(c->mechanism, sizeof c->mechanism, "%s", mech);
    size_t kl = kp_scram_key_len(kp_scram_mech_parse(mech)), l2 = 0;
    bool salt = false, sk = false, svk = false, it = false;
    for (const char *p = v; *p;) {
        const char *e = strchr(p, ',');
        size_t n = e ? (size_t)(e - p) : strlen(p);
        const char *eq = memchr(p, '=', n);
        if (!eq)
            return -1;
        size_t kn = (size_t)(eq - p), vn = n - kn - 1;
        int got;
        if (kn == 4 && !memcmp(p, "salt", 4)) {
            salt = (got = kp_scram_b64_decode(eq + 1, vn, c->salt, sizeof c->salt)) > 0;
            c->salt_len = salt ? (size_t)got : 0;
        } else if (kn == 10 && !memcmp(p, "stored_key", 10)) {
            sk = (got = kp_scram_b64_decode(eq + 1, vn, c->stored_key, sizeof c->stored_key)) ==
                 (int)kl;
            c->key_len = kl;
        } else if (kn == 10 && !memcmp(p, "server_key", 10)) {
            svk = (got = kp_scram_b64_decode(eq + 1, vn, c->server_key, sizeof c->server_key)) ==
                  (int)kl;
            l2 = kl;
        } else if (kn == 10 && !memcmp(p, "iterations", 10)) {
            c->iterations = atoi(eq + 1);
            it = c->iterations >= SCRAM_MIN_ITERATIONS && c->iterations <= SCRAM_MAX_ITERATIONS;
        }
        p = e ? e + 1 : p + n;
    }
    c->created_at = bk_now_ms();
    return salt && sk && svk && it && l2 == kl && kl ? 0 : -1;
}

static void cred_format(const md_scram_cred *c, char *out, size_t cap)
{
    char salt[100], sk[100], svk[100];
    kp_scram_b64_encode(c->salt, c->salt_len, salt, sizeof salt);
    kp_scram_b64_encode(c->stored_key, c->key_len, sk, sizeof sk);
    kp_scram_b64_encode(c->server_key, c->key_len, svk, sizeof svk);
    snprintf(out, cap, "salt=%s,stored_key=%s,server_key=%s,iterations=%d", salt, sk, svk,
             (int)c->iterations);
}

/* ---- apply half ---------------------------------------------------------------------- */
/* The user's rows := what kv says (Z2); kv NULL: the znode is gone. */
static void apply_user(bk_broker *b, const char *name, const md_kv *kv, size_t n)
{
    char err[MD_ERRLEN];
    for (size_t m = 0; m < sizeof mechs / sizeof *mechs; m++) {
        const char *v = NULL;
        for (size_t i = 0; i < n; i++)
            if (!strcmp(kv[i].name, mechs[m]))
                v = kv[i].value;
        md_scram_cred c, have;
        if (v && cred_parse(mechs[m], v, &c)) {
            BK_ERROR("zookeeper: %s/%s: %s is not a SCRAM credential; left as it was",
                     USERS, name, mechs[m]);
            continue;
        }
        if (v) {
            /* Unchanged keeps its created_at (Z3). */
            if (md_user_get(b->db, name, mechs[m], &have) == 0 && have.salt_len == c.salt_len &&
                !memcmp(have.salt, c.salt, c.salt_len) && have.iterations == c.iterations &&
                !memcmp(have.stored_key, c.stored_key, c.key_len))
                continue;
            if (md_user_upsert(b->db, name, &c, err, sizeof err))
                BK_ERROR("cannot store the SCRAM credential of %s from ZooKeeper: %s", name, err);
            else
                BK_INFO("SCRAM credential %s for User:%s applied from ZooKeeper", mechs[m], name);
        } else {
            bool deleted;
            if (md_user_delete(b->db, name, mechs[m], &deleted, err, sizeof err))
                BK_ERROR("cannot delete the SCRAM credential of %s: %s", name, err);
            else if (deleted)
                BK_INFO("SCRAM credential %s for User:%s deleted from ZooKeeper", mechs[m],
                        name);
        }
    }
}

static void on_user(bk_broker *b, const zk_result *r, void *arg)
{
    char *name = arg;
    if (r->rc == ZNONODE) {
        apply_user(b, name, NULL, 0);
    } else if (r->rc == ZOK) {
        md_kv *kv = NULL;
        size_t n = 0;
        char err[256];
        if (r->len <= 0 || cl_zj_config_parse(r->data, (size_t)r->len, &kv, &n, err, sizeof err))
            BK_ERROR("zookeeper: %s/%s is not Kafka's config JSON (%s); ignored", USERS, name,
                     r->len <= 0 ? "empty" : err);
        else
            apply_user(b, name, kv, n);
        md_kv_free(kv, n);
    }
    /* Connection loss: the resync after the reconnect reads it again (Z2). */
    free(name);
}

#define ZNAME_MAX (3 * SCRAM_MAX_NAME)      /* a sanitized name and its NUL */

/* /config/users/<name sanitized> into path[ZNAME_MAX + 16]. */
static void user_path(const char *name, char *path)
{
    char z[ZNAME_MAX];
    cl_zj_sanitize(name, z, sizeof z);           /* fits: names < SCRAM_MAX_NAME */
    snprintf(path, ZNAME_MAX + 16, USERS "/%s", z);
}

/* The user name of a child of /config/users into name[SCRAM_MAX_NAME]; -1
 * (logged) when it is not one Kafka's Sanitizer could have written. */
static int child_user(const char *child, char *name)
{
    if (cl_zj_desanitize(child, name, SCRAM_MAX_NAME) == 0 && name[0] &&
        bk_utf8_valid(name, strlen(name)))
        return 0;
    BK_WARN("zookeeper: %s/%s is not a sanitized user name; skipped", USERS, child);
    return -1;
}

static void read_user(bk_broker *b, const char *name)
{
    char path[ZNAME_MAX + 16];
    user_path(name, path);
    char *arg = strdup(name);
    if (arg)
        cl_zk_get(b->zk, path, true, on_user, arg);
}

typedef struct names {
    char **v;
    size_t n, cap;
} names;

static void collect(void *arg, const char *name, const char *mechanism, int32_t iterations)
{
    (void)mechanism;
    (void)iterations;
    names *ns = arg;
    if (ns->n && !strcmp(ns->v[ns->n - 1], name))
        return;
    if (ns->n == ns->cap) {
        size_t cap = ns->cap ? ns->cap * 2 : 16;
        char **v = realloc(ns->v, cap * sizeof *v);
        if (!v)
            return;
        ns->v = v;
        ns->cap = cap;
    }
    if ((ns->v[ns->n] = strdup(name)))
        ns->n++;
}

static void on_users(bk_broker *b, const zk_result *r, void *arg)
{
    (void)arg;
    if (r->rc != ZOK)
        return;                       /* the next (re)connect resyncs (Z2) */
    names local = { 0 };
    md_user_list(b->db, NULL, collect, &local);
    for (size_t i = 0; i < local.n; i++) {
        char z[ZNAME_MAX];
        bool there = false;
        cl_zj_sanitize(local.v[i], z, sizeof z);
        for (int k = 0; k < r->nchildren && !there; k++)
            there = !strcmp(r->children[k], z);
        if (!there)
            apply_user(b, local.v[i], NULL, 0);
        free(local.v[i]);
    }
    free(local.v);
    char name[SCRAM_MAX_NAME];
    for (int k = 0; k < r->nchildren; k++)
        if (child_user(r->children[k], name) == 0)
            read_user(b, name);
}

void cl_sasl_zk_resync(bk_broker *b)
{
    cl_zk_children(b->zk, USERS, true, on_users, NULL);
}

bool cl_sasl_zk_on_watch(bk_broker *b, int type, const char *path)
{
    size_t n = strlen(USERS);
    if (strncmp(path, USERS, n) || (path[n] && path[n] != '/'))
        return false;
    if (!path[n]) {                   /* children changed: users came or went */
        cl_sasl_zk_resync(b);
        return true;
    }
    const char *child = path + n + 1;
    char name[SCRAM_MAX_NAME];
    if (!*child || strchr(child, '/') || child_user(child, name) != 0)
        return true;
    if (type == ZOO_DELETED_EVENT)
        apply_user(b, name, NULL, 0);
    else
        read_user(b, name);
    return true;
}

/* ---- write half ------------------------------------------------------------------------ */
typedef struct pub {
    char *name;
    kp_buf json;
    int tries;
} pub;

static void pub_write(bk_broker *b, pub *p, bool create);

static void pub_free(pub *p)
{
    kp_buf_free(&p->json);
    free(p->name);
    free(p);
}

/* set, or create when missing; two writes of one user racing to create
 * its znode: the loser sets instead (ZNODEEXISTS), a few times at most. */
static void on_write(bk_broker *b, const zk_result *r, void *arg)
{
    pub *p = arg;
    bool retry = (r->rc == ZNONODE || r->rc == ZNODEEXISTS) && ++p->tries < 5;
    if (retry) {
        pub_write(b, p, r->rc == ZNONODE);
        return;
    }
    if (r->rc != ZOK)
        BK_ERROR("zookeeper: cannot write %s/%s: %s; the other brokers keep the old "
                 "credentials until it is changed again", USERS, p->name, cl_zk_rc_str(r->rc));
    pub_free(p);
}

static void pub_write(bk_broker *b, pub *p, bool create)
{
    char path[ZNAME_MAX + 16];
    user_path(p->name, path);
    if (create)
        cl_zk_create(b->zk, path, (const char *)p->json.data, (int)p->json.len, 0, on_write, p);
    else
        cl_zk_set(b->zk, path, (const char *)p->json.data, (int)p->json.len, -1, on_write, p);
}

static void on_note(bk_broker *b, const zk_result *r, void *arg)
{
    (void)arg;
    if (r->rc != ZOK)
        BK_WARN("zookeeper: cannot leave a change notification for a user: %s",
                cl_zk_rc_str(r->rc));
    else
        cl_notices_purge(b, "/config/changes");
}

void cl_sasl_zk_publish(bk_broker *b, const char *name)
{
    md_kv kv[2];
    char vals[2][400];
    size_t n = 0;
    for (size_t m = 0; m < sizeof mechs / sizeof *mechs; m++) {
        md_scram_cred c;
        if (md_user_get(b->db, name, mechs[m], &c) == 0) {
            cred_format(&c, vals[n], sizeof vals[n]);
            kv[n] = (md_kv){ (char *)mechs[m], vals[n] };
            n++;
        }
    }
    pub *p = calloc(1, sizeof *p);
    if (!p || !(p->name = strdup(name))) {
        free(p);
        BK_ERROR("out of memory publishing the SCRAM credentials of %s", name);
        return;
    }
    kp_buf_init(&p->json);
    cl_zj_config_format(kv, n, &p->json);
    pub_write(b, p, false);
    /* Kafka's change notification (its brokers read /config/users/<name> then). */
    kp_buf note;
    kp_buf_init(&note);
    char entity[ZNAME_MAX + 16];
    user_path(name, entity);
    memmove(entity, entity + strlen("/config/"), strlen(entity) - strlen("/config/") + 1);
    cl_zj_config_change_format(entity, &note);
    cl_zk_create(b->zk, "/config/changes/config_change_", (const char *)note.data, (int)note.len,
              ZOO_SEQUENCE, on_note, NULL);
    kp_buf_free(&note);
}
