/*
 * daemon/security/sec_authz.c — the authorizer (Kafka's AclAuthorizer semantics) and its
 * decision cache.
 *
 * A request is allowed when:
 *   - the authorizer is off (authorizer.class.name empty: every request, as
 *     before there were ACLs), or
 *   - the principal is one of super.users, or
 *   - no ACL at all names the resource (for any principal) and
 *     allow.everyone.if.no.acl.found is true, or
 *   - no DENY ACL matches (principal, host, op), and an ALLOW ACL matches.
 * An ACL names a resource when its type is the resource's and it is LITERAL
 * with the resource's name or "*", or PREFIXED with a prefix of the name.
 * It matches a principal when its principal is that one or "User:*", a host
 * when its host is that one or "*".  DENY matches op when its operation is
 * op or ALL; ALLOW also when it implies op (READ, WRITE, DELETE and ALTER
 * imply DESCRIBE; ALTER_CONFIGS implies DESCRIBE_CONFIGS) — Kafka's rules.
 *
 * The hot path (every Produce partition, every Fetch topic) must not scan
 * the ACLs nor query SQLite: decisions are cached by (principal, host,
 * resource type, name, operation) in a direct-mapped table of CACHE_SLOTS;
 * a hit is one hash, one memcmp.  A change of the ACL set bumps the
 * generation, which empties the whole cache at once.
 *
 * Invariants:
 *   Z1. A cached decision is the one decide() gives for the current ACL set:
 *       every slot whose gen differs from az->gen is empty, and
 *       sec_authz_load bumps az->gen after replacing the set.
 *   Z2. The ACL set is only replaced whole (sec_authz_load), on the event
 *       loop; pointers handed out by sec_authz_select live until then.
 *   Z3. The ACL set equals the acls table: every change is written to
 *       SQLite first (in cluster mode by the resync from ZooKeeper,
 *       cluster_acls.c K1), then reloaded from it (sec_authz_reload).
 */
#include "daemon/security/sec_authz.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/view/view.h"
#include "daemon/view/view_store.h"
#include "daemon/request.h"
#include "daemon/security/sec_peer.h"

#define CACHE_SLOTS 4096                 /* power of two */
#define CACHE_KEY_MAX 768                /* longer keys are decided uncached */

typedef struct cache_slot {
    uint64_t hash, gen;
    char *key;
    uint32_t keylen;
    bool allow;
} cache_slot;

struct bk_authz {
    bool enabled, allow_if_none;
    char **super;
    size_t nsuper;
    bk_acl *acls;
    size_t n;
    uint64_t gen;                        /* Z1; starts at 1 (slots start at 0) */
    cache_slot cache[CACHE_SLOTS];
};

/* ---- names ---------------------------------------------------------------- */
static const char *const res_names[] = {
    [BK_RES_ANY] = "ANY", [BK_RES_TOPIC] = "TOPIC", [BK_RES_GROUP] = "GROUP",
    [BK_RES_CLUSTER] = "CLUSTER", [BK_RES_TRANSACTIONAL_ID] = "TRANSACTIONAL_ID",
    [BK_RES_DELEGATION_TOKEN] = "DELEGATION_TOKEN", [BK_RES_USER] = "USER",
    [BK_RES_SUBJECT] = "SUBJECT",
};
static const char *const pat_names[] = {
    [BK_PAT_ANY] = "ANY", [BK_PAT_MATCH] = "MATCH", [BK_PAT_LITERAL] = "LITERAL",
    [BK_PAT_PREFIXED] = "PREFIXED",
};
static const char *const op_names[] = {
    [BK_OP_ANY] = "ANY", [BK_OP_ALL] = "ALL", [BK_OP_READ] = "READ", [BK_OP_WRITE] = "WRITE",
    [BK_OP_CREATE] = "CREATE", [BK_OP_DELETE] = "DELETE", [BK_OP_ALTER] = "ALTER",
    [BK_OP_DESCRIBE] = "DESCRIBE", [BK_OP_CLUSTER_ACTION] = "CLUSTER_ACTION",
    [BK_OP_DESCRIBE_CONFIGS] = "DESCRIBE_CONFIGS", [BK_OP_ALTER_CONFIGS] = "ALTER_CONFIGS",
    [BK_OP_IDEMPOTENT_WRITE] = "IDEMPOTENT_WRITE", [BK_OP_CREATE_TOKENS] = "CREATE_TOKENS",
    [BK_OP_DESCRIBE_TOKENS] = "DESCRIBE_TOKENS",
};
static const char *const perm_names[] = {
    [BK_PERM_ANY] = "ANY", [BK_PERM_DENY] = "DENY", [BK_PERM_ALLOW] = "ALLOW",
};

#define NAME_OF(tab, v) ((v) > 0 && (size_t)(v) < sizeof tab / sizeof *tab ? tab[v] : NULL)
static int parse_in(const char *const *tab, size_t n, const char *s)
{
    for (size_t i = 1; s && i < n; i++)
        if (tab[i] && !strcmp(tab[i], s))
            return (int)i;
    return 0;
}
#define PARSE_IN(tab, s) parse_in(tab, sizeof tab / sizeof *tab, s)

const char *sec_res_name(int v)  { return NAME_OF(res_names, v); }
const char *sec_pat_name(int v)  { return NAME_OF(pat_names, v); }
const char *sec_op_name(int v)   { return NAME_OF(op_names, v); }
const char *sec_perm_name(int v) { return NAME_OF(perm_names, v); }
int sec_res_parse(const char *s)  { return PARSE_IN(res_names, s); }
int sec_pat_parse(const char *s)  { return PARSE_IN(pat_names, s); }
int sec_op_parse(const char *s)   { return PARSE_IN(op_names, s); }
int sec_perm_parse(const char *s) { return PARSE_IN(perm_names, s); }

/* ---- life ----------------------------------------------------------------- */
int sec_authz_new(bool enabled, const char *super, bool allow_if_none, bk_authz **out)
{
    bk_authz *az = calloc(1, sizeof *az);
    if (!az)
        return KP_E_NOMEM;
    az->enabled = enabled;
    az->allow_if_none = allow_if_none;
    az->gen = 1;
    /* super.users: "User:a;User:b", blanks around each ignored (Kafka's). */
    for (const char *p = super ? super : ""; *p;) {
        const char *e = strchr(p, ';');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        const char *s = p;
        while (len && (*s == ' ' || *s == '\t'))
            s++, len--;
        while (len && (s[len - 1] == ' ' || s[len - 1] == '\t'))
            len--;
        if (len) {
            char **grown = realloc(az->super, (az->nsuper + 1) * sizeof *grown);
            if (!grown || !(grown[az->nsuper] = strndup(s, len))) {
                if (grown)
                    az->super = grown;
                sec_authz_free(az);
                return KP_E_NOMEM;
            }
            az->super = grown;
            az->nsuper++;
        }
        p = e ? e + 1 : p + len;
    }
    *out = az;
    return 0;
}

static void acls_free(bk_acl *a, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        free(a[i].name);
        free(a[i].principal);
        free(a[i].host);
    }
    free(a);
}

void sec_authz_free(bk_authz *az)
{
    if (!az)
        return;
    for (size_t i = 0; i < az->nsuper; i++)
        free(az->super[i]);
    free(az->super);
    acls_free(az->acls, az->n);
    for (size_t i = 0; i < CACHE_SLOTS; i++)
        free(az->cache[i].key);
    free(az);
}

bool sec_authz_enabled(const bk_authz *az)
{
    return az && az->enabled;
}

int sec_authz_load(bk_authz *az, const md_acl *rows, size_t n)
{
    bk_acl *a = n ? calloc(n, sizeof *a) : NULL;
    if (n && !a)
        return KP_E_NOMEM;
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        bk_acl x = {
            .res = (int8_t)sec_res_parse(rows[i].resource_type),
            .pat = (int8_t)sec_pat_parse(rows[i].pattern_type),
            .op = (int8_t)sec_op_parse(rows[i].operation),
            .perm = (int8_t)sec_perm_parse(rows[i].permission),
        };
        if (x.res <= BK_RES_ANY || x.pat < BK_PAT_LITERAL || x.op <= BK_OP_ANY ||
            x.perm <= BK_PERM_ANY) {
            BK_WARN("ACL with unknown names skipped: %s %s %s %s %s", rows[i].resource_type,
                    rows[i].pattern_type, rows[i].operation, rows[i].permission,
                    rows[i].resource_name);
            continue;
        }
        x.name = strdup(rows[i].resource_name);
        x.principal = strdup(rows[i].principal);
        x.host = strdup(rows[i].host);
        a[k++] = x;
        if (!x.name || !x.principal || !x.host) {
            acls_free(a, k);
            return KP_E_NOMEM;
        }
    }
    acls_free(az->acls, az->n);
    az->acls = a;
    az->n = k;
    az->gen++;                                   /* Z1 */
    return 0;
}

/* ---- matching ------------------------------------------------------------- */
static bool str_is(const char *s, kp_str k)
{
    return k.len >= 0 && strlen(s) == (size_t)k.len && !memcmp(s, k.p, (size_t)k.len);
}

/* The ACL names the resource (the top of this file). */
static bool names_resource(const bk_acl *a, int res, kp_str name)
{
    if (a->res != res)
        return false;
    if (a->pat == BK_PAT_LITERAL)
        return !strcmp(a->name, "*") || str_is(a->name, name);
    size_t pl = strlen(a->name);
    return name.len >= 0 && pl <= (size_t)name.len && !memcmp(a->name, name.p, pl);
}

static bool implies(int acl_op, int op)
{
    if (acl_op == BK_OP_ALL || acl_op == op)
        return true;
    if (op == BK_OP_DESCRIBE)
        return acl_op == BK_OP_READ || acl_op == BK_OP_WRITE || acl_op == BK_OP_DELETE ||
               acl_op == BK_OP_ALTER;
    return op == BK_OP_DESCRIBE_CONFIGS && acl_op == BK_OP_ALTER_CONFIGS;
}

/* The ACL is for this principal (or User:*) from this host (or "*"). */
static bool applies_to(const bk_acl *a, const char *principal, const char *host)
{
    return (!strcmp(a->principal, principal) || !strcmp(a->principal, "User:*")) &&
           (!strcmp(a->host, host) || !strcmp(a->host, "*"));
}

static bool super_user(const bk_authz *az, const char *principal)
{
    for (size_t i = 0; i < az->nsuper; i++)
        if (!strcmp(az->super[i], principal))
            return true;
    return false;
}

/* The uncached decision: one pass over the ACLs (cost O(ACLs)). */
static bool decide(const bk_authz *az, const char *principal, const char *host, int res,
                   kp_str name, int op)
{
    if (super_user(az, principal))
        return true;
    bool named = false, allowed = false;
    for (size_t i = 0; i < az->n; i++) {
        const bk_acl *a = &az->acls[i];
        if (!names_resource(a, res, name))
            continue;
        named = true;
        if (!applies_to(a, principal, host))
            continue;
        if (a->perm == BK_PERM_DENY && (a->op == BK_OP_ALL || a->op == op))
            return false;                        /* DENY wins */
        if (a->perm == BK_PERM_ALLOW && implies(a->op, op))
            allowed = true;
    }
    return named ? allowed : az->allow_if_none;
}

bool sec_authz_any(const bk_authz *az, const char *principal, const char *host, int res, int op)
{
    if (!az || !az->enabled)
        return true;
    if (super_user(az, principal))
        return true;
    bool typed = false, allowed = false;
    for (size_t i = 0; i < az->n; i++) {
        const bk_acl *a = &az->acls[i];
        if (a->res != res)
            continue;
        typed = true;
        if (!applies_to(a, principal, host))
            continue;
        bool everything = (a->pat == BK_PAT_LITERAL && !strcmp(a->name, "*")) ||
                          (a->pat == BK_PAT_PREFIXED && !a->name[0]);
        if (a->perm == BK_PERM_DENY && everything && (a->op == BK_OP_ALL || a->op == op))
            return false;                        /* denied on every resource */
        if (a->perm == BK_PERM_ALLOW && implies(a->op, op))
            allowed = true;
    }
    return typed ? allowed : az->allow_if_none;
}

static uint64_t fnv1a(const char *p, size_t n)
{
    uint64_t h = 14695981039346656037ull;
    for (size_t i = 0; i < n; i++)
        h = (h ^ (uint8_t)p[i]) * 1099511628211ull;
    return h;
}

bool sec_authz_check(bk_authz *az, const char *principal, const char *host, int res,
                    kp_str name, int op)
{
    if (!az || !az->enabled)
        return true;
    if (name.len < 0)
        name = kp_str_cstr("");
    /* key: res, op, principal NUL host NUL name */
    char key[CACHE_KEY_MAX];
    size_t pl = strlen(principal), hl = strlen(host);
    size_t kl = 2 + pl + 1 + hl + 1 + (size_t)name.len;
    if (kl > sizeof key)
        return decide(az, principal, host, res, name, op);
    key[0] = (char)res;
    key[1] = (char)op;
    memcpy(key + 2, principal, pl + 1);
    memcpy(key + 3 + pl, host, hl + 1);
    memcpy(key + 4 + pl + hl, name.p, (size_t)name.len);
    uint64_t h = fnv1a(key, kl);
    cache_slot *s = &az->cache[h & (CACHE_SLOTS - 1)];
    if (s->gen == az->gen && s->hash == h && s->keylen == kl && !memcmp(s->key, key, kl))
        return s->allow;
    bool allow = decide(az, principal, host, res, name, op);
    if (s->keylen < kl || !s->key) {
        char *k = realloc(s->key, kl);
        if (!k)
            return allow;                        /* uncached this time */
        s->key = k;
    }
    memcpy(s->key, key, kl);
    *s = (cache_slot){ .hash = h, .gen = az->gen, .key = s->key, .keylen = (uint32_t)kl,
                       .allow = allow };
    return allow;
}

/* ---- filters and validation ---------------------------------------------- */
static bool filter_matches(const bk_acl_filter *f, const bk_acl *a)
{
    if ((f->res != BK_RES_ANY && f->res != a->res) ||
        (a->res == BK_RES_SUBJECT && f->res != BK_RES_SUBJECT) ||  /* sec_authz.h */
        (f->op != BK_OP_ANY && f->op != a->op) ||
        (f->perm != BK_PERM_ANY && f->perm != a->perm) ||
        (f->principal.len >= 0 && !str_is(a->principal, f->principal)) ||
        (f->host.len >= 0 && !str_is(a->host, f->host)))
        return false;
    if (f->pat == BK_PAT_MATCH) {
        if (f->name.len < 0)
            return true;
        return names_resource(a, a->res, f->name);
    }
    if (f->pat != BK_PAT_ANY && f->pat != a->pat)
        return false;
    return f->name.len < 0 || str_is(a->name, f->name);
}

int sec_authz_select(const bk_authz *az, const bk_acl_filter *f, const bk_acl ***out,
                    size_t *n)
{
    *out = NULL;
    *n = 0;
    if (!az->n)
        return 0;
    const bk_acl **v = malloc(az->n * sizeof *v);
    if (!v)
        return KP_E_NOMEM;
    for (size_t i = 0; i < az->n; i++)
        if (filter_matches(f, &az->acls[i]))
            v[(*n)++] = &az->acls[i];
    *out = v;
    return 0;
}

int sec_acl_validate(int res, kp_str name, int pat, kp_str principal, kp_str host, int op,
                    int perm, char *err, size_t errlen)
{
    const char *why = NULL;
    const char *colon = principal.len > 0 ? memchr(principal.p, ':', (size_t)principal.len) : NULL;
    if (res <= BK_RES_ANY || !sec_res_name(res))
        why = "Invalid resource type";
    else if (pat != BK_PAT_LITERAL && pat != BK_PAT_PREFIXED)
        why = "Invalid pattern type: only LITERAL and PREFIXED ACLs can be created";
    else if (op <= BK_OP_ANY || !sec_op_name(op))
        why = "Invalid operation";
    else if (perm != BK_PERM_ALLOW && perm != BK_PERM_DENY)
        why = "Invalid permission type";
    else if (name.len <= 0)
        why = "Resource name must not be empty";
    else if (res == BK_RES_CLUSTER && !str_is(BK_CLUSTER_NAME, name))
        why = "The only valid name for the CLUSTER resource is kafka-cluster";
    else if (!colon || colon == principal.p || colon == principal.p + principal.len - 1)
        why = "Invalid principal: expected type:name, e.g. User:alice";
    else if (host.len <= 0)
        why = "Host must not be empty (\"*\" is any host)";
    if (!why)
        return KP_NONE;
    snprintf(err, errlen, "%s", why);
    return KP_INVALID_REQUEST;
}

/* ---- the broker's ----------------------------------------------------------- */
int sec_authz_reload(bk_broker *b)
{
    md_acl *rows;
    size_t n;
    int rc = md_acl_list(b->db, &rows, &n);
    if (rc == 0)
        rc = sec_authz_load(b->authz, rows, n);
    md_acl_free(rows, n);
    if (rc)
        BK_ERROR("cannot load the ACLs from the acls table (%d)", rc);
    return rc;
}

bool sec_authorized(bk_req *r, int res, kp_str name, int op)
{
    bk_authz *az = r->b->authz;
    if (!az || !az->enabled)
        return true;
    return sec_authz_check(az, net_conn_principal(r->conn), net_conn_host(r->conn), res, name, op);
}

int sec_acl_apply(bk_broker *b, const md_acl *del, size_t ndel, const md_acl *add, size_t nadd,
                 bk_topic_op *op, char *err, size_t errlen)
{
    err[0] = 0;
    /* Cluster mode: ZooKeeper only; the table follows its resync (cluster_acls.c K1). */
    return b->store->acl_change(b, del, ndel, add, nadd, op, err, errlen);
}

void sec_acl_row(const bk_acl *a, md_acl *row)
{
    *row = (md_acl){
        .resource_type = (char *)sec_res_name(a->res), .resource_name = a->name,
        .pattern_type = (char *)sec_pat_name(a->pat), .principal = a->principal,
        .host = a->host, .operation = (char *)sec_op_name(a->op),
        .permission = (char *)sec_perm_name(a->perm),
    };
}

/* Kafka's AclEntry.supportedOperations, per resource type. */
static const int8_t supported_ops[][9] = {
    [BK_RES_TOPIC] = { BK_OP_READ, BK_OP_WRITE, BK_OP_CREATE, BK_OP_DESCRIBE, BK_OP_DELETE,
                       BK_OP_ALTER, BK_OP_DESCRIBE_CONFIGS, BK_OP_ALTER_CONFIGS },
    [BK_RES_GROUP] = { BK_OP_READ, BK_OP_DESCRIBE, BK_OP_DELETE },
    [BK_RES_CLUSTER] = { BK_OP_CREATE, BK_OP_CLUSTER_ACTION, BK_OP_DESCRIBE_CONFIGS,
                         BK_OP_ALTER_CONFIGS, BK_OP_IDEMPOTENT_WRITE, BK_OP_ALTER,
                         BK_OP_DESCRIBE },
    [BK_RES_TRANSACTIONAL_ID] = { BK_OP_DESCRIBE, BK_OP_WRITE },
    [BK_RES_DELEGATION_TOKEN] = { BK_OP_DESCRIBE },
    [BK_RES_USER] = { BK_OP_CREATE_TOKENS, BK_OP_DESCRIBE_TOKENS },
};

int32_t sec_authorized_ops(bk_req *r, int res, kp_str name)
{
    int32_t bits = 0;
    if (res <= BK_RES_ANY || (size_t)res >= sizeof supported_ops / sizeof *supported_ops)
        return 0;
    for (size_t i = 0; i < sizeof *supported_ops && supported_ops[res][i]; i++)
        if (sec_authorized(r, res, name, supported_ops[res][i]))
            bits |= (int32_t)1 << supported_ops[res][i];
    return bits;
}

bool sec_authorized_any(bk_req *r, int res, int op)
{
    return sec_authz_any(r->b->authz, net_conn_principal(r->conn), net_conn_host(r->conn), res, op);
}
